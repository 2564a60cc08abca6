package arbiter

import (
	"fmt"
	"testing"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// Who bids under each filter estimate (themis.filter_estimate). L, a sweep
// of six 1-GPU trials of an hour, holds two GPUs of a 4-GPU machine with
// four trials queued; S, one 10-minute job, waits. The current estimate
// puts L's four queued trials on its one GPU of share beyond those it
// holds (ρ 1.39 against S's 1.0), so L bids; the fluid one runs L's six
// hours of work on its fair share of 3 GPUs in all (ρ 0.72), so S does.
// The whole estimate counts no finished work here and ranks as the current
// one.
func TestFilterEstimateWhoBids(t *testing.T) {
	nodes := []core.Node{node("n0", "r0", 4)}
	job := func(app, id string, work float64, seq uint64) core.Job {
		return core.Job{Key: core.JobKey{Namespace: "sim", ID: id}, App: app, GPUs: 1, Work: work, Remaining: work, Seq: seq}
	}
	for _, c := range []struct {
		estimate, bidder string
	}{
		{"", "L"},
		{EstimateCurrent, "L"},
		{EstimateWhole, "L"},
		{EstimateFluid, "S"},
	} {
		p := New(0.8, 600, nil)
		p.FilterEstimate = c.estimate
		var jobs []core.Job
		var held []core.Grant
		for i := range 6 {
			j := job("L", fmt.Sprintf("l%d", i), 3600, uint64(i))
			if i < 2 {
				j.Phase = core.Granted
				held = append(held, core.Grant{Job: j.Key, GPUs: []string{fmt.Sprintf("n0-%d", i)}})
			}
			jobs = append(jobs, j)
		}
		jobs = append(jobs, job("S", "s", 600, 6))
		decide(t, p, nodes, jobs, held, 0)
		rep, _ := p.LastRound()
		var bid []string
		for _, ar := range rep.Apps {
			if ar.Bid {
				bid = append(bid, ar.App)
			}
		}
		if fmt.Sprint(bid) != fmt.Sprint([]string{c.bidder}) {
			t.Errorf("filter_estimate=%q: bidders %v, want %s alone", c.estimate, bid, c.bidder)
		}
	}
}

// doneWork counts the work of the jobs that have left, each as its agent
// last saw it (a liar's total as it reported it), by app.
func TestDoneWork(t *testing.T) {
	p := New(0.8, 600, nil)
	p.LieRemaining = map[string]float64{"B": 0.5}
	a0 := core.Job{Key: core.JobKey{Namespace: "sim", ID: "a0"}, App: "A", GPUs: 2, Work: 100, Remaining: 40}
	a1 := core.Job{Key: core.JobKey{Namespace: "sim", ID: "a1"}, App: "A", GPUs: 1, Work: 50, Remaining: 50}
	b0 := core.Job{Key: core.JobKey{Namespace: "sim", ID: "b0"}, App: "B", GPUs: 4, Work: 100, Remaining: 60}
	for _, c := range []struct {
		jobs         []*core.Job
		doneA, doneB float64
	}{
		{[]*core.Job{&a0, &a1, &b0}, 0, 0},
		{[]*core.Job{&a1, &b0}, 200, 0}, // a0 left: 100 s on 2 GPUs
		{[]*core.Job{&a1}, 200, 280},    // b0 left: reported 100 - 60/2 = 70 s on 4 GPUs
		{[]*core.Job{&a1}, 200, 280},    // nothing new
		{nil, 250, 280},                 // a1 left
		{[]*core.Job{&a0}, 250, 280},    // a job back is not done
	} {
		p.done.observe(c.jobs, p.reported)
		if a, b := p.done.of("A"), p.done.of("B"); a != c.doneA || b != c.doneB {
			t.Errorf("jobs %d: done A %v, B %v; want %v, %v", len(c.jobs), a, b, c.doneA, c.doneB)
		}
	}
}

// The reservation's worst-off app follows the filter's estimate when one
// is set (themis.filter_estimate) and CurrentRho otherwise.
func TestWorstByFilterEstimate(t *testing.T) {
	env := auction.Env{ClusterGPUs: 8, Lease: 600}
	q := func(id string, left float64, gang int) auction.Job {
		return auction.Job{ID: id, IterTime: float64(gang), ItersLeft: left, ItersTotal: left, Demand: gang, Gang: gang}
	}
	// A waited 3,000 s for a 60-s job (CurrentRho ≈ 30); B is an 8-GPU
	// gang of an hour that just came (≈ 1.2).
	apps := []auction.App{
		{ID: "A", Elapsed: 3000, NAvg: 2, Jobs: []auction.Job{q("a", 60, 1)}},
		{ID: "B", NAvg: 2, Jobs: []auction.Job{q("b", 3600, 8)}},
	}
	for _, c := range []struct {
		filterA, filterB float64
		filter           bool
		want             string
		need             int
	}{
		{0, 0, false, "A", 1},
		{0, 0, true, "A", 1},
		{0.2, 0.5, false, "A", 1},
		{0.2, 0.5, true, "B", 8},
	} {
		apps[0].FilterRho, apps[1].FilterRho = c.filterA, c.filterB
		if w, need := worst(apps, env, c.filter); w != c.want || need != c.need {
			t.Errorf("filter rho %v, %v (used %v): worst %s needing %d, want %s needing %d", c.filterA, c.filterB, c.filter, w, need, c.want, c.need)
		}
	}
}
