package planner

import (
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

// submitAs registers a themis job of namespace ns claiming a virtual
// cluster, priority and class in its stanza.
func (f *fakeNomad) submitAs(ns, id string, gpus int, class, vc string, priority int) {
	f.submitIn(id, gpus, class, "10s", vc, priority)
	k := core.JobKey{Namespace: "default", ID: id}
	j := f.jobs[k]
	delete(f.jobs, k)
	j.Namespace = ptr(ns)
	f.jobs[core.JobKey{Namespace: ns, ID: id}] = j
}

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
	h.fn.submitAs("team-trial", "trial-be", 8, "be", "trial", 0)
	h.round("trial's job")
	held := h.fs.leases[key("team-trial", "trial-be")].LeaseID
	if held == "" {
		t.Fatalf("team trial's job was not granted: %+v", h.fs.statuses[key("team-trial", "trial-be")])
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
		h.fn.submitAs("team-research", c.id, 2, c.class, c.vc, c.priority)
	}
	h.fn.submitAs("team-research", "research-good", 2, "be", "research", 100)
	for i := range 3 {
		h.round("the claims " + itoa(i))
	}
	for _, c := range claims {
		k := key("team-research", c.id)
		st := h.fs.statuses[k]
		if _, ok := h.fs.leases[k]; ok || st.State != "rejected" {
			t.Errorf("%s: status %s (%s), lease %v: want rejected, nothing leased", c.id, st.State, st.Reason, h.fs.leases[k].GPUs)
		}
		for _, n := range c.names {
			if !strings.Contains(st.Reason, n) {
				t.Errorf("%s's rejection does not name %s: %s", c.id, n, st.Reason)
			}
		}
	}
	if l := h.fs.leases[key("team-trial", "trial-be")]; l.LeaseID != held || l.Revoke != nil {
		t.Errorf("team trial's job lost its lease %s: %+v", held, l)
	}
	if _, ok := h.fs.leases[key("team-research", "research-good")]; !ok {
		t.Errorf("team research's own job was not granted: %+v", h.fs.statuses[key("team-research", "research-good")])
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
	h.fn.submitAs("team-a", "ok", 1, "be", "default", 10)
	h.fn.submitAs("team-a", "high", 1, "be", "default", 11)
	h.fn.submitAs("team-b", "outsider", 1, "be", "default", 0)
	h.round("first")
	h.round("second")
	if _, ok := h.fs.leases[core.JobKey{Namespace: "team-a", ID: "ok"}]; !ok {
		t.Error("team-a's job within its ceiling was not granted")
	}
	for _, c := range []struct{ ns, id, want string }{
		{"team-a", "high", `themis.priority: 11 is above the highest priority namespace "team-a" may use in this cluster`},
		{"team-b", "outsider", `namespace: namespace "team-b" may not use this cluster`},
	} {
		if st := h.fs.statuses[core.JobKey{Namespace: c.ns, ID: c.id}]; st.State != "rejected" || !strings.Contains(st.Reason, c.want) {
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
	h.fn.submitAs("team-b", "j", 1, "be", "default", 0)
	snap, err := h.fn.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h.fn.cached = snap
	h.round("team-b not bound")
	k := core.JobKey{Namespace: "team-b", ID: "j"}
	if st := h.fs.statuses[k]; st.State != "rejected" {
		t.Fatalf("status %+v, want rejected", st)
	}
	h.p.SetStack(vcsStack(t, "fifo", "tenants.hcl", "namespace \"team-a\" {}\nnamespace \"team-b\" {}\n"))
	h.round("team-b bound")
	if _, ok := h.fs.leases[k]; !ok {
		t.Fatalf("not granted after the reload: %+v", h.fs.statuses[k])
	}
}
