package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/lease"
)

// TestACLCluster: the multi-client dev cluster with ACLs on (`themis dev
// -acl -clients 2`): Consul with default deny, a Nomad server bootstrapped
// with the management token, two clients with ACLs on and the themis
// driver's Consul token. Nomad refuses an anonymous request (the server's
// API and a client's own), and a `themis planner` with exactly the
// planner's tokens runs a 16-GPU job, a gang with one part on each client
// (8 GPUs per node), to completion: both clients' drivers checked the
// lease and met at the gang's rendezvous in Consul with the driver's
// token, and nothing the planner or an agent did was refused.
func TestACLCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 3*time.Minute)
	defer cancel()
	began := time.Now()
	cs, cluster := startConsulCluster(t, ctx, "acl-cluster", []string{"node-0", "node-1"}, true)
	t.Logf("%s: Consul, the server and 2 clients up with ACLs", time.Since(began).Round(time.Millisecond))
	tok := cluster.Tokens()
	if tok.Management != cs.Tokens().Management || tok.PlannerNomad == "" || tok.OperatorNomad == "" || tok.PlannerConsul == "" {
		t.Fatalf("cluster tokens %+v: want Consul's management and Consul tokens, and Nomad's planner and operator tokens", tok)
	}

	// ACLs are on in the server and in each client: no token, refused
	// (the server's node list; a client's own stats, which the client
	// answers itself, and without ACLs on in the client would answer).
	for _, url := range []string{cluster.NomadAddr() + "/v1/nodes", cluster.ClientAddr(0) + "/v1/client/stats", cluster.ClientAddr(1) + "/v1/client/stats"} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s without a token: %s, want 403 Forbidden: ACLs are not on", url, resp.Status)
		}
	}
	// What the agents log from here on is checked for refusals below.
	logs := []string{cluster.ServerLog(), cluster.ClientLog(0), cluster.ClientLog(1)}
	from := map[string]int64{}
	for _, log := range logs {
		fi, err := os.Stat(log)
		if err != nil {
			t.Fatal(err)
		}
		from[log] = fi.Size()
	}
	nc, cc := apiClients(t, cluster.NomadAddr(), cs.ConsulAddr(), tok.Management)

	// The planner with exactly its tokens runs a gang across both clients.
	p := startThemisPlanner(t, cluster.NomadAddr(), cs.ConsulAddr(), cluster.DataDir(), tok.PlannerNomad, tok.PlannerConsul)
	id := "acl-gang"
	if _, _, err := nc.Jobs().Register(trainJob{gpus: 16, steps: 20}.build(t, id), nil); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	var jl *lease.JobLease
	eventually(t, 60*time.Second, "the gang's lease of two parts", func() (bool, error) {
		jl = readKV[lease.JobLease](t, cc, lease.JobKey("default", id))
		return jl != nil && len(jl.Parts) == 2, nil
	})
	eventually(t, 90*time.Second, id+" complete on both nodes", func() (bool, error) {
		as, _, err := nc.Jobs().Allocations(id, true, nil)
		if err != nil {
			return false, err
		}
		done := map[string]bool{}
		for _, a := range as {
			if a.ClientStatus == "failed" {
				var events []string
				for _, ts := range a.TaskStates {
					for _, e := range ts.Events {
						events = append(events, e.Type+": "+e.DisplayMessage)
					}
				}
				t.Fatalf("allocation %s on %s failed: %s\nplanner:\n%s", a.ID, a.NodeName, strings.Join(events, "; "), p.output())
			}
			if a.ClientStatus == "complete" {
				done[a.NodeName] = true
			}
		}
		return done["node-0"] && done["node-1"], nil
	})
	t.Logf("%s: the 16-GPU gang ran to completion on node-0 and node-1", time.Since(began).Round(time.Millisecond))
	// The drivers (lease reads, gang rendezvous, progress) and the agents
	// were refused nothing with their tokens.
	for _, log := range logs {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		b = b[from[log]:]
		if i := bytes.Index(bytes.ToLower(b), []byte("permission denied")); i >= 0 {
			t.Errorf("%s has a refusal: %s", filepath.Base(log), b[max(0, i-300):min(len(b), i+200)])
		}
	}
	p.stop(t)
	if out := p.output(); strings.Contains(strings.ToLower(out), "permission denied") {
		t.Errorf("the planner with its policies was refused something:\n%s", out)
	}
}
