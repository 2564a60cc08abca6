package consul

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/aclhint"
	"github.com/themis-nomad/themis/planner/lease"
)

// Every plain KV write of the planner (policy state, the last auction, a
// pending grant) refused by Consul's ACLs names the rule the planner's
// policy has for that key, as the transactions and lists do (docs/acl.md).
func TestPutRefusalNamesTheRule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Permission denied", http.StatusForbidden)
	}))
	defer srv.Close()
	c, err := api.NewClient(&api.Config{Address: strings.TrimPrefix(srv.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	s, ctx := NewStore(c), context.Background()
	for _, w := range []struct {
		name, prefix string
		put          func() error
	}{
		{"policy state", "themis/policy/", func() error { return s.PutPolicyState(ctx, "themis", []byte("{}")) }},
		{"auction", "themis/auction/", func() error { return s.PutAuction(ctx, []byte("{}")) }},
		{"pending grant", "themis/leases/", func() error {
			return s.PutPending(ctx, lease.Pending{Namespace: "default", JobID: "a"})
		}},
	} {
		err := w.put()
		var e *aclhint.Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), `key_prefix "`+w.prefix+`" { policy = "write" }`) {
			t.Errorf("%s: %v, want an ACL refusal naming key_prefix %q write", w.name, err, w.prefix)
		}
	}
}
