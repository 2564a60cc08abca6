package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// Self-declared tenancy, in ACL mode on the 3-client dev cluster
// (docs/adversary.md, part 4): examples/vcs/two-policies.hcl gives team
// trial (namespace team-trial, FitGpp) and team research (team-research,
// Tiresias-LAS) a node of cells each. A user who holds only a submit token
// for team-research (examples/acl/user.nomad.hcl for that namespace)
// submits a job claiming vc = "trial", priority = 1000, class = "te": the
// planner rejects it, naming the field, the namespace and the rule, and
// team trial's running job keeps its lease (before bindings, FitGpp
// preempted it for the hostile TE job). The research user's own job runs,
// and `themis check -once` with the operator's tokens finds nothing.
func TestAdversaryACLTenancyIsBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 4*time.Minute)
	defer cancel()
	cs, cluster := startConsulCluster(t, ctx, "adv-tenancy", []string{"node-0", "node-1", "node-2"}, true)
	tok := cluster.Tokens()
	admin, cc := apiClients(t, cluster.NomadAddr(), cs.ConsulAddr(), tok.Management)
	users := map[string]*nomadapi.Client{}
	for _, ns := range []string{"team-trial", "team-research"} {
		if _, err := admin.Namespaces().Register(&nomadapi.Namespace{Name: ns,
			Capabilities: &nomadapi.NamespaceCapabilities{EnabledTaskDrivers: []string{"themis"}}}, nil); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
		users[ns] = teamUserClient(t, admin, cluster.NomadAddr(), ns)
	}
	p := startThemisPlanner(t, cluster.NomadAddr(), cs.ConsulAddr(), cluster.DataDir(), tok.PlannerNomad, tok.PlannerConsul,
		"-policy", "fifo", "-vc-config", filepath.Join(env.root, "examples", "vcs", "two-policies.hcl"))
	submit := func(ns, id string, o trainJob) {
		t.Helper()
		j := o.build(t, id)
		j.Namespace = &ns
		if _, _, err := users[ns].Jobs().Register(j, nil); err != nil {
			t.Fatalf("register %s/%s as its team's user: %v", ns, id, err)
		}
	}
	leaseOf := func(ns, id string) *lease.JobLease { return readKV[lease.JobLease](t, cc, lease.JobKey(ns, id)) }

	// Team trial's best-effort job fills its VC's node.
	submit("team-trial", "trial-be", trainJob{gpus: 8, vc: "trial", steps: 900})
	var held *lease.JobLease
	eventually(t, 90*time.Second, "team-trial's job granted", func() (bool, error) {
		held = leaseOf("team-trial", "trial-be")
		return held != nil, nil
	})
	// Team research's user claims trial's VC, the top priority and TE.
	submit("team-research", "claims-trial", trainJob{gpus: 2, vc: "trial", priority: 1000, class: "te", steps: 50})
	submit("team-research", "research-good", trainJob{gpus: 2, vc: "research", steps: 5})
	eventually(t, 90*time.Second, "team-research's own job complete", func() (bool, error) {
		as, _, err := admin.Jobs().Allocations("research-good", true, &nomadapi.QueryOptions{Namespace: "team-research"})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(as, func(a *nomadapi.AllocationListStub) bool { return a.ClientStatus == "complete" }), nil
	})
	st := readKV[lease.JobStatus](t, cc, lease.StatusKey(core.JobKey{Namespace: "team-research", ID: "claims-trial"}))
	if st == nil || st.State != "rejected" {
		t.Errorf("the claim on trial's VC: status %+v, want rejected", st)
	} else {
		for _, n := range []string{"themis.vc", `namespace "team-research"`, `virtual cluster "trial"`, "two-policies.hcl:"} {
			if !strings.Contains(st.Reason, n) {
				t.Errorf("the rejection does not name %s: %s", n, st.Reason)
			}
		}
	}
	if l := leaseOf("team-research", "claims-trial"); l != nil {
		t.Errorf("the claim on trial's VC was granted %v", l.GPUs)
	}
	if l := leaseOf("team-trial", "trial-be"); l == nil || l.LeaseID != held.LeaseID || l.Revoke != nil {
		t.Errorf("team-trial's job lost its lease %s: now %+v", held.LeaseID, l)
	}
	cmd := exec.Command(env.themis, "check", "-once", "-nomad-addr", cluster.NomadAddr(), "-consul-addr", cs.ConsulAddr())
	cmd.Env = append(os.Environ(), "NOMAD_TOKEN="+tok.OperatorNomad, "CONSUL_HTTP_TOKEN="+tok.OperatorConsul)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ok: ") {
		t.Errorf("themis check -once with the operator's tokens: %v\n%s", err, out)
	}
	if t.Failed() {
		t.Logf("planner:\n%s", p.output())
	}
}

// teamUserClient is a Nomad client with a token of exactly
// examples/acl/user.nomad.hcl for namespace ns.
func teamUserClient(t *testing.T, admin *nomadapi.Client, addr, ns string) *nomadapi.Client {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join(env.root, "examples", "acl", "user.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	policy := strings.Replace(string(rules), `namespace "team"`, `namespace "`+ns+`"`, 1)
	if policy == string(rules) {
		t.Fatal(`examples/acl/user.nomad.hcl names no namespace "team"`)
	}
	return clientWithPolicy(t, admin, addr, "themis-user-"+ns, policy, "a user of "+ns)
}
