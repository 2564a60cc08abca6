package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/httpapi"
)

// The planner's API resolves callers' tokens through a real Nomad with
// ACLs (httpapi.NomadAuth; docs/api.md, "Access"): a token of exactly
// examples/acl/user.nomad.hcl for team-b reads team-b only (Nomad lists it
// no other namespace it may list jobs in), the management token reads
// every namespace, and no token or an unknown one reads nothing.
func TestAPITokensResolvedByNomad(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 3*time.Minute)
	defer cancel()
	_, cluster := startConsulCluster(t, ctx, "api-acl", []string{"node-0"}, true)
	tok := cluster.Tokens()
	admin, _ := apiClients(t, cluster.NomadAddr(), "", tok.Management)
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := admin.Namespaces().Register(&nomadapi.Namespace{Name: ns}, nil); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	rules, err := os.ReadFile(filepath.Join(env.root, "examples", "acl", "user.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	policy := strings.Replace(string(rules), `namespace "team"`, `namespace "team-b"`, 1)
	if _, err := admin.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "themis-user-team-b", Rules: policy}, nil); err != nil {
		t.Fatal(err)
	}
	user, _, err := admin.ACLTokens().Create(&nomadapi.ACLToken{Name: "team-b user", Type: "client", Policies: []string{"themis-user-team-b"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := nomadapi.DefaultConfig()
	cfg.Address, cfg.SecretID = cluster.NomadAddr(), tok.Management // NewNomadAuth drops it
	auth, err := httpapi.NewNomadAuth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := auth.Scope(ctx, user.SecretID)
	if err != nil || sc.All || !sc.Sees("team-b") || sc.Sees("team-a") || sc.Sees("default") {
		t.Errorf("team-b's user: scope %+v, err %v; want team-b only", sc, err)
	}
	if sc, err := auth.Scope(ctx, tok.Management); err != nil || !sc.All {
		t.Errorf("management token: scope %+v, err %v; want every namespace", sc, err)
	}
	for _, bad := range []string{"", "00000000-0000-0000-0000-000000000001"} {
		if sc, err := auth.Scope(ctx, bad); err == nil && (sc.All || len(sc.Namespaces) > 0) {
			t.Errorf("token %q: scope %+v, want nothing", bad, sc)
		}
	}
}
