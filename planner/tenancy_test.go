package planner

import (
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

const boundTeams = `
vc "trial" {
  policy = "fitgpp"
  cells {
    type  = "node8"
    count = 1
  }
  namespace "team-trial" {}
}
vc "research" {
  cells {
    type  = "node8"
    count = 1
  }
  namespace "team-research" {
    max_priority  = 100
    classes       = ["be"]
    opportunistic = false
  }
}
`

// Tenants are bound to their virtual clusters (docs/adversary.md, part 4):
// a job whose namespace may not use the VC, priority or class it claims is
// rejected naming the field, the namespace and the rule, and takes nothing
// from the VC's own team: team trial's running job keeps its lease where,
// unbound, FitGpp preempted it for the claim. What a namespace may use, it
// gets.
func TestTenantsBoundToTheirVCs(t *testing.T) {
	h := newClusterHarness(t, 2, 8, vcsStack(t, "fifo", "bound.hcl", boundTeams))
	key := func(ns, id string) core.JobKey { return core.JobKey{Namespace: ns, ID: id} }
	h.Nomad.SubmitAs("team-trial", "trial-be", 8, "be", "trial", 0)
	h.Round("trial's job")
	held := h.Store.JobLeases[key("team-trial", "trial-be")].LeaseID
	if held == "" {
		t.Fatalf("team trial's job was not granted: %+v", h.Store.JobStatuses[key("team-trial", "trial-be")])
	}
	claims := []struct {
		id, class, vc string
		priority      int
		names         []string
	}{
		{"claims-trial", "te", "trial", 1000, []string{`themis.vc: namespace "team-research" may not use virtual cluster "trial"`, `"team-trial" only`, "bound.hcl:8,3"}},
		{"too-high", "be", "research", 101, []string{"themis.priority: 101", `namespace "team-research"`, "max_priority = 100"}},
		{"te-in-research", "te", "research", 0, []string{`themis.class: namespace "team-research" may not submit class "te"`}},
		{"opportunistic", "be", "research", -1, []string{"themis.priority: -1 (opportunistic)", "opportunistic = false"}},
		{"unknown-vc", "be", "nowhere", -1, []string{`themis.vc: virtual cluster "nowhere" is not configured`}},
	}
	for _, c := range claims {
		h.Nomad.SubmitAs("team-research", c.id, 2, c.class, c.vc, c.priority)
	}
	h.Nomad.SubmitAs("team-research", "research-good", 2, "be", "research", 100)
	for i := range 3 {
		h.Round("the claims " + itoa(i))
	}
	for _, c := range claims {
		k := key("team-research", c.id)
		st := h.Store.JobStatuses[k]
		if _, ok := h.Store.JobLeases[k]; ok || st.State != "rejected" {
			t.Errorf("%s: status %s (%s), lease %v: want rejected, nothing leased", c.id, st.State, st.Reason, h.Store.JobLeases[k].GPUs)
		}
		for _, n := range c.names {
			if !strings.Contains(st.Reason, n) {
				t.Errorf("%s's rejection does not name %s: %s", c.id, n, st.Reason)
			}
		}
	}
	if l := h.Store.JobLeases[key("team-trial", "trial-be")]; l.LeaseID != held || l.Revoke != nil {
		t.Errorf("team trial's job lost its lease %s: %+v", held, l)
	}
	if _, ok := h.Store.JobLeases[key("team-research", "research-good")]; !ok {
		t.Errorf("team research's own job was not granted: %+v", h.Store.JobStatuses[key("team-research", "research-good")])
	}
}

// A VC config without vc blocks binds namespaces to the one default
// virtual cluster: the stack has no virtual clusters (Themis runs with it),
// and its bindings hold.
func TestNamespaceBindingsWithoutVCs(t *testing.T) {
	st := vcsStack(t, "fifo", "tenants.hcl", `
namespace "team-a" {
  max_priority = 10
}
`)
	if st.VCs != nil || st.Tenants == nil {
		t.Fatalf("stack VCs %v, tenants %v: want bindings only", st.VCs, st.Tenants)
	}
	vcsStack(t, "themis", "tenants.hcl", `namespace "team-a" {}`) // Themis, which VCs refuse, takes bindings

	h := newHarness(t, 8, st)
	h.Nomad.SubmitAs("team-a", "ok", 1, "be", "default", 10)
	h.Nomad.SubmitAs("team-a", "high", 1, "be", "default", 11)
	h.Nomad.SubmitAs("team-b", "outsider", 1, "be", "default", 0)
	h.Round("first")
	h.Round("second")
	if _, ok := h.Store.JobLeases[core.JobKey{Namespace: "team-a", ID: "ok"}]; !ok {
		t.Error("team-a's job within its ceiling was not granted")
	}
	for _, c := range []struct{ ns, id, want string }{
		{"team-a", "high", `themis.priority: 11 is above the highest priority namespace "team-a" may use in this cluster`},
		{"team-b", "outsider", `namespace: namespace "team-b" may not use this cluster`},
	} {
		if st := h.Store.JobStatuses[core.JobKey{Namespace: c.ns, ID: c.id}]; st.State != "rejected" || !strings.Contains(st.Reason, c.want) {
			t.Errorf("%s/%s: %s (%s), want rejected: %s", c.ns, c.id, st.State, st.Reason, c.want)
		}
	}
}

// A binding changed by a reload (SIGHUP: SetStack) applies from the next
// round to jobs already parsed: the snapshot keeps parsed jobs across
// rounds (as nomad.Client does), and a round's rejection is not kept on
// them (nomad.Job.Reset).
func TestReloadedBindingAdmitsARejectedJob(t *testing.T) {
	h := newHarness(t, 8, vcsStack(t, "fifo", "tenants.hcl", `namespace "team-a" {}`))
	h.Nomad.SubmitAs("team-b", "j", 1, "be", "default", 0)
	snap, err := h.Nomad.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h.Nomad.Cached = snap
	h.Round("team-b not bound")
	k := core.JobKey{Namespace: "team-b", ID: "j"}
	if st := h.Store.JobStatuses[k]; st.State != "rejected" {
		t.Fatalf("status %+v, want rejected", st)
	}
	h.P.SetStack(vcsStack(t, "fifo", "tenants.hcl", "namespace \"team-a\" {}\nnamespace \"team-b\" {}\n"))
	h.Round("team-b bound")
	if _, ok := h.Store.JobLeases[k]; !ok {
		t.Fatalf("not granted after the reload: %+v", h.Store.JobStatuses[k])
	}
}
