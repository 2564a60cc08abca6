package arbiter

import (
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

// earlyEndScene: app A runs two 4-GPU jobs on the two 4-GPU machines from
// t = 0 (leases to 600 s), app X waits for a gang the cluster can never
// hold (it only counts in the contention), and at t = 10 app S arrives
// with a 13-second job on 2 GPUs, T_id about 39 s.
func earlyEndScene(t *testing.T, p *Policy) (nodes []core.Node, jobs []core.Job, held []core.Grant) {
	t.Helper()
	nodes = []core.Node{node("n0", "r0", 4), node("n1", "r0", 4)}
	a1 := core.Job{Key: core.JobKey{Namespace: "sim", ID: "a1"}, App: "A", GPUs: 4, Remaining: 36000, Work: 36000, Skew: 1.1}
	a2 := core.Job{Key: core.JobKey{Namespace: "sim", ID: "a2"}, App: "A", GPUs: 4, Remaining: 36000, Work: 36000, Skew: 1.1, Seq: 1}
	x := core.Job{Key: core.JobKey{Namespace: "sim", ID: "x"}, App: "X", GPUs: 64, Remaining: 100, Work: 100, Seq: 2}
	s := decide(t, p, nodes, []core.Job{a1, a2, x}, nil, 0)
	if len(s.grants) != 2 {
		t.Fatalf("t=0: %+v, want a1 and a2 granted", s)
	}
	a1.Phase, a2.Phase = core.Granted, core.Granted
	for _, g := range s.grants {
		id, gpus, _ := strings.Cut(g, "=")
		held = append(held, core.Grant{Job: core.JobKey{Namespace: "sim", ID: id}, GPUs: strings.Split(gpus, "+")})
	}
	a1.Remaining, a2.Remaining = 35990, 35990
	sj := core.Job{Key: core.JobKey{Namespace: "sim", ID: "s"}, App: "S", GPUs: 2, Remaining: 13, Work: 13, Skew: 1.1, Submitted: at(10), Seq: 3}
	return nodes, []core.Job{a1, a2, x, sj}, held
}

// Without the rule the newcomer waits for the lease end at 600 s; with it,
// one of A's leases (A stays at ρ ≈ 0.5 even waiting a lease) ends at
// once and S runs.
func TestEarlyEndForAppLeftBehind(t *testing.T) {
	p := New(0.8, 600, nil)
	nodes, jobs, held := earlyEndScene(t, p)
	if s := decide(t, p, nodes, jobs, held, 10); len(s.grants)+len(s.preempts) != 0 {
		t.Fatalf("early end off: %+v, want S to wait for the lease end", s)
	}
	p = New(0.8, 600, nil)
	p.EarlyEnd = true
	nodes, jobs, held = earlyEndScene(t, p)
	s := decide(t, p, nodes, jobs, held, 10)
	if len(s.preempts) != 1 || len(s.grants) != 1 || !strings.HasPrefix(s.grants[0], "s=") {
		t.Fatalf("early end on: %+v, want one of A's jobs preempted and s granted", s)
	}
}

// An app that would reach ρ <= 1 by the lease end is not left behind, and
// no app's lease ends for it.
func TestEarlyEndNotForAnAppThatCanWait(t *testing.T) {
	p := New(0.8, 600, nil)
	p.EarlyEnd = true
	nodes, jobs, held := earlyEndScene(t, p)
	jobs[3].Remaining, jobs[3].Work = 20000, 20000 // T_id in the hours: waiting 590 s is fine
	if s := decide(t, p, nodes, jobs, held, 10); len(s.grants)+len(s.preempts) != 0 {
		t.Fatalf("%+v, want S to wait for the lease end", s)
	}
}

// A job is cut only if its app stays at ρ <= 1 waiting a lease: with
// no other app in the contention, A runs at ρ about 1 and keeps its
// leases.
func TestEarlyEndSparesAnAppNearRhoOne(t *testing.T) {
	p := New(0.8, 600, nil)
	p.EarlyEnd = true
	nodes, jobs, held := earlyEndScene(t, p)
	jobs = append(jobs[:2], jobs[3]) // no X: A alone until S arrives
	p = New(0.8, 600, nil)
	p.EarlyEnd = true
	a1, a2 := jobs[0], jobs[1]
	a1.Phase, a2.Phase = core.Queued, core.Queued
	s := decide(t, p, nodes, []core.Job{a1, a2}, nil, 0)
	if len(s.grants) != 2 {
		t.Fatalf("t=0: %+v", s)
	}
	if s := decide(t, p, nodes, jobs, held, 10); len(s.grants)+len(s.preempts) != 0 {
		t.Fatalf("%+v, want A's leases kept", s)
	}
}

func TestEarlyEndKnob(t *testing.T) {
	for v, want := range map[string]bool{"on": true, "off": false} {
		k, _ := core.ParseKnobs([]string{"themis.early_end=" + v})
		p, err := FromKnobs(k)
		if err != nil || p.EarlyEnd != want {
			t.Errorf("themis.early_end=%s: %v, %v", v, p, err)
		}
	}
	k, _ := core.ParseKnobs([]string{"themis.early_end=maybe"})
	if _, err := FromKnobs(k); err == nil {
		t.Error("themis.early_end=maybe accepted")
	}
}

// An early end models the cut jobs' apps anew; with a filter of
// its own (themis.filter_remaining, themis.filter_estimate) each app must
// still be ranked by that filter's ρ, set on the new fair shares, not by
// CurrentRho (FilterRho 0).
func TestEarlyEndKeepsTheFilterRho(t *testing.T) {
	for _, c := range []struct{ remaining, estimate string }{
		{FilterAsRun, ""},
		{FilterReported, EstimateFluid},
	} {
		p := New(0.8, 600, nil)
		p.EarlyEnd = true
		p.FilterRemaining, p.FilterEstimate = c.remaining, c.estimate
		nodes, jobs, held := earlyEndScene(t, p)
		js := make([]*core.Job, len(jobs))
		for i := range jobs {
			js[i] = &jobs[i]
		}
		r := p.observe(at(10), js, core.NewFreeGPUs(nodes, held), held)
		p.openOffer(r)
		p.modelApps(r)
		p.endEarly(r)
		if len(r.expiredJobs) == 0 {
			t.Fatalf("%+v: no lease ended early; the scene should cut one of A's", c)
		}
		want := map[string]float64{}
		for _, a := range r.apps {
			want[a.ID] = a.FilterRho
		}
		p.filterBy(r) // what the filter gives on the round's final models
		for _, a := range r.apps {
			if want[a.ID] <= 0 || a.FilterRho != want[a.ID] {
				t.Errorf("%+v: app %s ranked by %v after the early end, want its filter ρ %v", c, a.ID, want[a.ID], a.FilterRho)
			}
		}
	}
}
