package driver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/lease"
)

// TestConsulRefusalHint: a lease read that Consul refuses (403) names the
// key, the rule of examples/acl/driver.consul.hcl it needs, and docs/acl.md;
// the token of consul_token is the one sent.
func TestConsulRefusalHint(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("X-Consul-Token")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("Permission denied: token lacks permission 'key:read'"))
	}))
	defer srv.Close()
	c, err := NewConsulLeasesToken(strings.TrimPrefix(srv.URL, "http://"), "driver-token")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GPULeases(context.Background(), []string{"GPU-0"})
	if got != "driver-token" {
		t.Errorf("token sent %q, want driver-token", got)
	}
	if err == nil {
		t.Fatal("a refused read succeeded")
	}
	for _, want := range []string{lease.GPUKey("GPU-0"), `key_prefix "themis/leases/" { policy = "read" }`, "examples/acl/driver.consul.hcl", "docs/acl.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
