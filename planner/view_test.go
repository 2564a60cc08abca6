package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// The view a round publishes (Config.OnRound) says what the round did
// (events, as written), what it left (leases, revoking ones with their
// deadline) and who waits where and why (the queue, in rank order).
func TestViewAfterEachRound(t *testing.T) {
	policy, err := policies.NewFitGpp(core.Knobs{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, 8, stack.Of(policy))
	var views []View
	h.config.OnRound = func(v View) { views = append(views, v) }
	h.config.MaxKillTimeout = 0
	h.Restart()
	last := func() View { return views[len(views)-1] }
	kinds := func(v View) (out []string) {
		for _, e := range v.Events {
			out = append(out, e.Kind+" "+e.Job.ID)
		}
		return out
	}

	h.Nomad.Submit("be", 8, "be", "10s")
	h.Nomad.Submit("be2", 4, "be", "10s")
	h.Round("be starts")
	v := last()
	if !v.Decided || v.Err != nil || v.Policy != "fitgpp" {
		t.Fatalf("view: decided %v err %v policy %q", v.Decided, v.Err, v.Policy)
	}
	if got := kinds(v); !slices.Equal(got, []string{"grant be"}) {
		t.Errorf("events %v, want [grant be]", got)
	}
	if len(v.Leases) != 1 || v.Leases[0].JobID != "be" || len(v.Leases[0].GPUs) != 8 {
		t.Errorf("leases %+v", v.Leases)
	}
	if len(v.Queue) != 1 || v.Queue[0].Job.ID != "be2" || v.Queue[0].Position != 1 || v.Queue[0].GPUs != 4 ||
		!strings.Contains(v.Queue[0].Reason, "free GPUs") {
		t.Errorf("queue %+v", v.Queue)
	}
	if len(v.Nodes) != 1 || len(v.Nodes[0].GPUs) != 8 || len(v.Jobs) != 2 || v.Jobs[0].Status.State != "granted" {
		t.Errorf("nodes %d, jobs %+v", len(v.Nodes), v.Jobs)
	}

	h.Nomad.Submit("te", 4, "te", "10s")
	h.Round("te preempts be")
	v = last()
	if got := kinds(v); !slices.Equal(got, []string{"preempt be"}) {
		t.Errorf("events %v, want [preempt be]", got)
	}
	if e := v.Events[0]; !strings.Contains(e.Reason, "fitgpp") || len(e.GPUs) != 8 {
		t.Errorf("preempt event %+v", e)
	}
	if l := v.Leases[0]; l.Revoke == nil || l.Revoke.Deadline.IsZero() {
		t.Errorf("the victim's lease is not revoking: %+v", l)
	}
	if len(v.Queue) == 0 || v.Queue[0].Job.ID != "te" || !strings.Contains(v.Queue[0].Reason, "waiting for default/be to stop") {
		t.Errorf("queue %+v: want te first, waiting for be", v.Queue)
	}

	for i := range 5 {
		h.Round("be stops " + itoa(i))
	}
	var all []string
	for _, v := range views[2:] {
		all = append(all, kinds(v)...)
	}
	if !slices.Contains(all, "release be") || !slices.Contains(all, "grant te") {
		t.Errorf("events after the preemption %v: want be released and te granted", all)
	}
	for _, v := range views {
		for _, e := range v.Events {
			if e.Reason == "" || e.Time.IsZero() {
				t.Errorf("event without reason or time: %+v", e)
			}
		}
	}
}

// With virtual clusters the view carries each VC's cells and each GPU's
// leaf cell.
func TestViewVirtualClusters(t *testing.T) {
	st := vcsStack(t, "fifo", "two-teams.hcl", twoTeams)
	h := newHarness(t, 8, st)
	var v View
	h.config.OnRound = func(nv View) { v = nv }
	h.Restart()
	h.Nomad.SubmitIn("vision", 4, "be", "10s", "vision", 0)
	h.Nomad.SubmitIn("vision2", 4, "be", "10s", "vision", 0)
	h.Round("vision runs")
	if len(v.VCs) != 2 || v.VCs[0].Name != "vision" || v.VCs[0].Used != 4 || len(v.VCs[0].Cells) == 0 {
		t.Fatalf("VCs %+v", v.VCs)
	}
	held := 0
	for _, c := range v.GPUCells {
		if slices.Contains(c.Jobs, core.JobKey{Namespace: "default", ID: "vision"}) {
			held++
			if c.VC != "vision" || c.Bound == "" {
				t.Errorf("GPU cell %+v: want bound in vision", c)
			}
		}
	}
	if held != 4 || len(v.GPUCells) != 8 {
		t.Errorf("%d of %d GPU cells held by vision, want 4 of 8", held, len(v.GPUCells))
	}
	if len(v.Queue) != 1 || v.Queue[0].VC != "vision" || v.Queue[0].Position != 1 {
		t.Errorf("queue %+v", v.Queue)
	}
}

// A gang's lease spans nodes: the view's lease keeps its parts, and its
// grant names every node.
func TestViewGang(t *testing.T) {
	h := newClusterHarness(t, 3, 8, mustStack(t, "fifo", stack.Options{}))
	var v View
	h.config.OnRound = func(nv View) { v = nv }
	h.Restart()
	h.Nomad.Submit("gang", 16, "be", "10s")
	h.Round("grant")
	if len(v.Leases) != 1 || len(v.Leases[0].Parts) != 2 || len(v.Leases[0].GPUs) != 16 {
		t.Fatalf("leases %+v", v.Leases)
	}
	if len(v.Events) != 1 || v.Events[0].Kind != EventGrant || strings.Count(v.Events[0].Node, ",") != 1 || len(v.Events[0].GPUs) != 16 {
		t.Errorf("events %+v: want one grant naming both nodes", v.Events)
	}
}
