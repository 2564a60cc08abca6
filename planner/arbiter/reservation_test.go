package arbiter

import (
	"fmt"
	"slices"
	"testing"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// A reservation gathers GPUs on the machine or rack that will hold the gang
// soonest (GPUs available now, then those of running jobs as their leases
// end or they finish), then on the one with the most available now.
func TestReservationTarget(t *testing.T) {
	machine := func(id, rack string, n int) auction.Machine {
		m := auction.Machine{ID: id, Rack: rack}
		for i := range n {
			m.Free = append(m.Free, fmt.Sprintf("%s-%d", id, i))
		}
		return m
	}
	all := auction.Offer{Machines: []auction.Machine{machine("m0", "r0", 8), machine("m1", "r0", 8), machine("m2", "r1", 4), machine("m3", "r1", 4)}}
	avail := auction.Offer{Machines: []auction.Machine{machine("m0", "r0", 2), machine("m1", "r0", 5), machine("m2", "r1", 4)}}
	tie := auction.Offer{Machines: []auction.Machine{machine("m0", "r0", 5), machine("m1", "r0", 5)}}
	// m0's job ends its lease in 30 s; m1's jobs hold their 3 GPUs for 500 s.
	soon := map[string][]release{"m0": {{t: 30, gpus: 6}}, "m1": {{t: 500, gpus: 3}}}
	for _, tc := range []struct {
		need  int
		avail auction.Offer
		soon  map[string][]release
		want  string
	}{
		{4, avail, nil, "[m1]"},     // m1 has 5 available, m2 only 4
		{8, avail, nil, "[m1]"},     // only the 8-GPU machines hold it
		{8, tie, nil, "[m0]"},       // equal: the first by ID
		{12, avail, nil, "[m0 m1]"}, // no machine holds 12; rack r0 does
		{20, avail, nil, "[]"},      // no rack does: anywhere
		{8, avail, soon, "[m0]"},    // m0 holds 8 in 30 s, m1 in 500 s
		{4, avail, soon, "[m1]"},    // held now by m1 and m2: the most available
	} {
		got, _ := target(tc.need, all, tc.avail, tc.soon)
		var ms []string
		for m := range got {
			ms = append(ms, m)
		}
		slices.Sort(ms)
		if fmt.Sprint(ms) != tc.want {
			t.Errorf("need %d: target %v, want %s", tc.need, ms, tc.want)
		}
	}
}

// reservationScene is a 4-GPU machine n0 that x holds under a lease that
// ends at t=600, two free 2-GPU machines, and w, a queued 4-GPU gang of
// work seconds that runs 1.2x slower spread.
func reservationScene(work float64) (p *Policy, nodes []core.Node, x, w core.Job, held []core.Grant) {
	p = New(0.8, 600, nil)
	nodes = []core.Node{node("n0", "r0", 4), node("n1", "r0", 2), node("n2", "r0", 2)}
	x = core.Job{Key: core.JobKey{Namespace: "sim", ID: "x"}, App: "X", GPUs: 4, Work: 7200, Remaining: 7000, Skew: 1.2, CrossRack: 1.3, Phase: core.Granted}
	w = core.Job{Key: core.JobKey{Namespace: "sim", ID: "w"}, App: "W", GPUs: 4, Work: work, Remaining: work, Skew: 1.2, CrossRack: 1.3, Seq: 1}
	held = []core.Grant{{Job: x.Key, Node: "n0", GPUs: []string{"n0-0", "n0-1", "n0-2", "n0-3"}}}
	return p, nodes, x, w, held
}

// A gang that the free GPUs hold only spread waits for the machine that
// holds it whole when its app, by its bid, finishes sooner so: an hour's
// job loses 12 minutes spread, against 10 minutes until x's lease ends.
func TestReservationWaitsForPlacement(t *testing.T) {
	p, nodes, x, w, held := reservationScene(3600)
	// t=0: four GPUs are free, on two machines; n0 would hold the gang
	// whole. Nothing is granted, nothing stopped (x's lease runs).
	if s := decide(t, p, nodes, []core.Job{x, w}, held, 0); len(s.grants) != 0 || len(s.preempts) != 0 {
		t.Fatalf("t=0: %+v, want w to wait for n0", s)
	}
	// The reservation holds n0 only: a 2-GPU job that comes meanwhile
	// gets a small machine at once.
	y := core.Job{Key: core.JobKey{Namespace: "sim", ID: "y"}, App: "Y", GPUs: 2, Work: 60, Remaining: 60, Skew: 1.2, CrossRack: 1.3, Seq: 2}
	if s := decide(t, p, nodes, []core.Job{x, w, y}, held, 1); fmt.Sprint(s.grants) != "[y=n1-0+n1-1]" || len(s.preempts) != 0 {
		t.Fatalf("t=1: %+v, want y on n1 and w still waiting", s)
	}
	// t=600: x's lease ends: the offer holds the gang on n0, so the round
	// runs; w, worse off, takes n0 and x moves to the small machines.
	x.Remaining = 6400
	s := decide(t, p, nodes, []core.Job{x, w}, held, 600)
	if fmt.Sprint(s.grants) != "[w=n0-0+n0-1+n0-2+n0-3 x=n1-0+n1-1+n2-0+n2-1]" || fmt.Sprint(s.preempts) != "[x]" {
		t.Fatalf("t=600: %+v, want w on n0 and x moved", s)
	}
}

// A gang that loses less running spread now than waiting for the machine
// that holds it whole does not wait: a 10-minute job loses 2 minutes.
func TestReservationNotWorthWaiting(t *testing.T) {
	p, nodes, x, w, held := reservationScene(600)
	if s := decide(t, p, nodes, []core.Job{x, w}, held, 0); fmt.Sprint(s.grants) != "[w=n1-0+n1-1+n2-0+n2-1]" || len(s.preempts) != 0 {
		t.Fatalf("t=0: %+v, want w spread at once", s)
	}
}
