package themispolicy

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/themis"
)

func node(name, rack string, gpus int) core.Node {
	n := core.Node{ID: name, Name: name, Rack: rack, Schedulable: true}
	for i := range gpus {
		n.GPUs = append(n.GPUs, core.GPU{ID: fmt.Sprintf("%s-%d", name, i), Index: i, Healthy: true})
	}
	return n
}

func at(s float64) time.Time {
	return time.Unix(0, 0).UTC().Add(time.Duration(s * float64(time.Second)))
}

type step struct {
	grants, preempts []string
}

func decide(t *testing.T, p *Policy, nodes []core.Node, jobs []core.Job, held []core.Grant, now float64) step {
	t.Helper()
	d := core.Planner{Policy: p}.Decide(core.State{Nodes: nodes, Jobs: jobs, Grants: held}, at(now))
	var s step
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.GrantAction:
			s.grants = append(s.grants, a.Grant.Job.ID+"="+strings.Join(a.Grant.GPUs, "+"))
		case core.PreemptAction:
			s.preempts = append(s.preempts, a.Grant.Job.ID)
		}
	}
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	return s
}

// Two apps of one 4-GPU job on one 4-GPU machine, worked by hand.
func TestRoundsAndLeases(t *testing.T) {
	p := New(0.8, 600, nil)
	nodes := []core.Node{node("n0", "r0", 4)}
	a := core.Job{Key: core.JobKey{Namespace: "sim", ID: "a"}, App: "A", GPUs: 4, Remaining: 3600, Skew: 1.1, CrossRack: 1.3}
	b := core.Job{Key: core.JobKey{Namespace: "sim", ID: "b"}, App: "B", GPUs: 4, Remaining: 3600, Skew: 1.1, CrossRack: 1.3,
		Submitted: at(100)}
	all := "n0-0+n0-1+n0-2+n0-3"

	// t=0: A is alone; it bids alone and wins the machine, c = 1, for a
	// whole lease.
	s := decide(t, p, nodes, []core.Job{a}, nil, 0)
	if len(s.grants) != 1 || s.grants[0] != "a="+all || len(s.preempts) != 0 {
		t.Fatalf("t=0: %+v, want a on the whole machine", s)
	}
	a.Phase = core.Granted
	held := []core.Grant{{Job: a.Key, Node: "n0", GPUs: strings.Split(all, "+")}}
	if nc := p.NextChange(at(0), []*core.Job{&a}); !nc.Equal(at(600)) {
		t.Fatalf("next change %v, want the lease's end at 600 s", nc)
	}

	// t=100: B arrives; nothing is free and A's lease runs.
	if s := decide(t, p, nodes, []core.Job{a, b}, held, 100); len(s.grants)+len(s.preempts) != 0 {
		t.Fatalf("t=100: %+v, want nothing", s)
	}

	// t=600: A's lease ends with 3000 s left. N_avg(A) = (100x1 + 500x2)/600
	// = 1.83, T_id(A) = 3600 x 1.83 = 6600, rho_old(A) = (600 + 3000 +
	// lease 600) / 6600 = 0.636; N_avg(B) = 2, T_id(B) = 7200, rho_old(B) =
	// (500 + 3600 + 600) / 7200 = 0.653. With f = 0.8 the worse, B, bids
	// alone and wins the machine; A is preempted.
	a.Remaining, a.Attained, a.Executed = 3000, 2400, 600
	s = decide(t, p, nodes, []core.Job{a, b}, held, 600)
	if len(s.preempts) != 1 || s.preempts[0] != "a" || len(s.grants) != 1 || s.grants[0] != "b="+all {
		t.Fatalf("t=600: %+v, want a preempted and b on the machine", s)
	}
	a.Phase, b.Phase = core.Queued, core.Granted
	held = []core.Grant{{Job: b.Key, Node: "n0", GPUs: strings.Split(all, "+")}}

	// t=1200: B's lease ends; A waits. A's rho_old has grown past B's, so
	// A gets the machine back.
	b.Remaining, b.Attained = 3000, 2400
	s = decide(t, p, nodes, []core.Job{a, b}, held, 1200)
	if len(s.preempts) != 1 || s.preempts[0] != "b" || len(s.grants) != 1 || s.grants[0] != "a="+all {
		t.Fatalf("t=1200: %+v, want b preempted and a back", s)
	}
	a.Phase, b.Phase = core.Granted, core.Finished
	held = []core.Grant{{Job: a.Key, Node: "n0", GPUs: strings.Split(all, "+")}}

	// t=1800: A's lease ends with nobody waiting: renewed, no action.
	if s := decide(t, p, nodes, []core.Job{a, b}, held, 1800); len(s.grants)+len(s.preempts) != 0 {
		t.Fatalf("t=1800: %+v, want the lease renewed silently", s)
	}
	if nc := p.NextChange(at(1800), []*core.Job{&a}); !nc.Equal(at(2400)) {
		t.Fatalf("next change %v, want 2400 s", nc)
	}
}

// An expired job whose app wins exactly its GPUs again keeps running; the
// leftover GPUs go to an app that did not bid, for a whole lease.
func TestRenewAndLeftovers(t *testing.T) {
	p := New(0.8, 600, nil)
	nodes := []core.Node{node("n0", "r0", 2), node("n1", "r0", 2)}
	a := core.Job{Key: core.JobKey{Namespace: "sim", ID: "a"}, App: "A", GPUs: 2, Remaining: 3600, Skew: 1.1}
	b := core.Job{Key: core.JobKey{Namespace: "sim", ID: "b"}, App: "B", GPUs: 2, Remaining: 3600, Skew: 1.1}
	s := decide(t, p, nodes, []core.Job{a, b}, nil, 0)
	if len(s.grants) != 2 {
		t.Fatalf("t=0: %+v, want both apps granted (one by auction, one as a leftover)", s)
	}
	a.Phase, b.Phase = core.Granted, core.Granted
	var held []core.Grant
	for _, g := range s.grants {
		id, gpus, _ := strings.Cut(g, "=")
		held = append(held, core.Grant{Job: core.JobKey{Namespace: "sim", ID: id}, GPUs: strings.Split(gpus, "+")})
	}
	if n := p.NextChange(at(0), []*core.Job{&a, &b}); !n.Equal(at(600)) {
		t.Fatalf("next change %v, want 600 s (c = 1 and a leftover both hold a whole lease)", n)
	}
	// A third app arrives; at 600 both leases end. Its job is queued, so a
	// round runs; whichever jobs win gangs that are exactly their own GPUs
	// keep running, the rest are preempted.
	c := core.Job{Key: core.JobKey{Namespace: "sim", ID: "c"}, App: "C", GPUs: 2, Remaining: 100, Skew: 1.1, Submitted: at(10)}
	a.Remaining, b.Remaining = 3000, 3000
	s = decide(t, p, nodes, []core.Job{a, b, c}, held, 600)
	if len(s.preempts) != 1 || len(s.grants) != 1 || !strings.HasPrefix(s.grants[0], "c=") {
		t.Fatalf("t=600: %+v, want one of a, b preempted for c and the other kept", s)
	}
}

func TestKnobs(t *testing.T) {
	k, _ := core.ParseKnobs([]string{"themis.f=0.5", "themis.lease=20m", "themis.lie=app-0001:+20%"})
	p, err := FromKnobs(k)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fairness != 0.5 || p.Lease != 1200 || p.Lie["app-0001"] != 1.2 {
		t.Errorf("f %v lease %v lie %v", p.Fairness, p.Lease, p.Lie)
	}
	for _, bad := range []string{"themis.f=2", "themis.lease=-1m", "themis.lie=app", "themis.lie=a:-150%"} {
		k, _ := core.ParseKnobs([]string{bad})
		if _, err := FromKnobs(k); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// stay keeps an expired job on its own GPUs when the round left them idle
// or gave them to a gang of the same class it can trade with, and gave it
// a gang placed no better elsewhere; it does not when the move improves
// placement or its GPUs are not free to keep.
func TestStayKeepsOwnGPUs(t *testing.T) {
	nodes := []core.Node{node("n0", "r0", 4), node("n1", "r0", 4), node("n2", "r0", 2), node("n3", "r0", 2)}
	key := func(id string) core.JobKey { return core.JobKey{Namespace: "sim", ID: id} }
	gpus := func(s string) []string { return strings.Split(s, "+") }
	held := []core.Grant{
		{Job: key("a"), Node: "n1", GPUs: gpus("n1-0+n1-1+n1-2+n1-3")}, // one machine
		{Job: key("s"), GPUs: gpus("n2-0+n2-1+n3-0+n3-1")},             // spread
	}
	free := core.NewFreeGPUs(nodes, nil)
	grantOf := map[core.JobKey]core.Grant{}
	for _, g := range held {
		grantOf[g.Job] = g
	}
	isExpired := map[core.JobKey]bool{key("a"): true, key("s"): true}
	for _, tc := range []struct {
		name     string
		out      []core.Grant
		idle     []string
		wantKept []string
		wantIdle int
		wantZ    string // z's GPUs after a swap
	}{
		{
			name:     "a's machine left idle: a stays, n0 goes back",
			out:      []core.Grant{{Job: key("a"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}},
			idle:     gpus("n1-0+n1-1+n1-2+n1-3"),
			wantKept: []string{"a"},
			wantIdle: 4,
		},
		{
			name: "a's machine partly taken: a moves",
			out:  []core.Grant{{Job: key("a"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}},
			idle: gpus("n1-0+n1-1+n1-2"),
		},
		{
			name: "s's spread GPUs idle but the new gang is on one machine: s moves",
			out:  []core.Grant{{Job: key("s"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}},
			idle: gpus("n2-0+n2-1+n3-0+n3-1"),
		},
		{
			name:     "a's machine went to z: they swap, a stays",
			out:      []core.Grant{{Job: key("a"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}, {Job: key("z"), Node: "n1", GPUs: gpus("n1-0+n1-1+n1-2+n1-3")}},
			wantKept: []string{"a"},
			wantZ:    "n0-0+n0-1+n0-2+n0-3",
		},
		{
			name: "s's spread GPUs went to z, s got a machine: no swap",
			out:  []core.Grant{{Job: key("s"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}, {Job: key("z"), GPUs: gpus("n2-0+n2-1+n3-0+n3-1")}},
		},
	} {
		kept := map[core.JobKey]bool{}
		out, idle := stay(append([]core.Grant(nil), tc.out...), tc.idle, isExpired, kept, grantOf, free)
		var got []string
		for k := range kept {
			got = append(got, k.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.wantKept) {
			t.Errorf("%s: kept %v, want %v", tc.name, got, tc.wantKept)
		}
		if tc.wantZ != "" {
			if len(out) != 1 || out[0].Job != key("z") || strings.Join(out[0].GPUs, "+") != tc.wantZ || out[0].Node != "n0" {
				t.Errorf("%s: grants %v, want z alone on %s", tc.name, out, tc.wantZ)
			}
		} else if len(tc.wantKept) > 0 {
			if len(out) != 0 || len(idle) != tc.wantIdle || idle[0] != "n0-0" {
				t.Errorf("%s: grants %v, idle %v; want none and n0's GPUs idle", tc.name, out, idle)
			}
		} else if len(out) != len(tc.out) || len(idle) != len(tc.idle) {
			t.Errorf("%s: grants %v, idle %v; want both unchanged", tc.name, out, idle)
		}
	}
}

// Expired leases are auctioned even when no job is queued, so two apps
// that both want the one 4-GPU machine take turns on it.
func TestExpiredLeasesRotateTheBigMachine(t *testing.T) {
	p := New(0.8, 600, nil)
	nodes := []core.Node{node("n0", "r0", 4), node("n1", "r0", 2), node("n2", "r0", 2)}
	a := core.Job{Key: core.JobKey{Namespace: "sim", ID: "a"}, App: "A", GPUs: 4, Work: 3600, Remaining: 3600, Skew: 1.2, CrossRack: 1.3}
	b := core.Job{Key: core.JobKey{Namespace: "sim", ID: "b"}, App: "B", GPUs: 4, Work: 3600, Remaining: 3600, Skew: 1.2, CrossRack: 1.3, Seq: 1}
	machine, spread := "n0-0+n0-1+n0-2+n0-3", "n1-0+n1-1+n2-0+n2-1"
	// t=0: equal ρ, A first by ID: A bids alone and wins the machine, B
	// gets the rest as leftovers.
	s := decide(t, p, nodes, []core.Job{a, b}, nil, 0)
	if fmt.Sprint(s.grants) != fmt.Sprint([]string{"a=" + machine, "b=" + spread}) {
		t.Fatalf("t=0: %+v, want a on the machine, b spread", s)
	}
	// t=600: both leases end with nothing queued. B ran 1.2x slower, so it
	// is further from its finish: it bids and takes the machine; A moves to
	// the spread GPUs.
	a.Phase, b.Phase = core.Granted, core.Granted
	a.Remaining, a.Attained, a.Executed = 3000, 2400, 600
	b.Remaining, b.Attained, b.Executed = 3100, 2400, 600
	held := []core.Grant{{Job: a.Key, Node: "n0", GPUs: strings.Split(machine, "+")}, {Job: b.Key, GPUs: strings.Split(spread, "+")}}
	s = decide(t, p, nodes, []core.Job{a, b}, held, 600)
	if len(s.preempts) != 2 || fmt.Sprint(s.grants) != fmt.Sprint([]string{"b=" + machine, "a=" + spread}) {
		t.Fatalf("t=600: %+v, want both moved: b on the machine, a spread", s)
	}
}

// A reservation gathers GPUs on the machine or rack that will hold the gang
// soonest (GPUs available now, then those of running jobs as their leases
// end or they finish), then on the one with the most available now.
func TestReservationTarget(t *testing.T) {
	machine := func(id, rack string, n int) themis.Machine {
		m := themis.Machine{ID: id, Rack: rack}
		for i := range n {
			m.Free = append(m.Free, fmt.Sprintf("%s-%d", id, i))
		}
		return m
	}
	all := themis.Offer{Machines: []themis.Machine{machine("m0", "r0", 8), machine("m1", "r0", 8), machine("m2", "r1", 4), machine("m3", "r1", 4)}}
	avail := themis.Offer{Machines: []themis.Machine{machine("m0", "r0", 2), machine("m1", "r0", 5), machine("m2", "r1", 4)}}
	tie := themis.Offer{Machines: []themis.Machine{machine("m0", "r0", 5), machine("m1", "r0", 5)}}
	// m0's job ends its lease in 30 s; m1's jobs hold their 3 GPUs for 500 s.
	soon := map[string][]release{"m0": {{t: 30, gpus: 6}}, "m1": {{t: 500, gpus: 3}}}
	for _, tc := range []struct {
		need  int
		avail themis.Offer
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

// FuzzFromKnobs: any themis.f, themis.lease and themis.lie either fail with
// an error naming the knob or give a policy whose settings the rounds can
// use: f in [0, 1], a positive finite lease, and positive finite lie
// factors.
func FuzzFromKnobs(f *testing.F) {
	f.Add("0.8", "10m", "app-0001:+20%")
	f.Add("1", "600", "a:-50%,b:100%")
	f.Add("", "", "")
	f.Add("nan", "1e400", "x:nan%")
	f.Add("0", "-1s", "x:inf%")
	f.Fuzz(func(t *testing.T, fv, lease, lie string) {
		var sets []string
		for _, kv := range [][2]string{{"themis.f", fv}, {"themis.lease", lease}, {"themis.lie", lie}} {
			if kv[1] != "" {
				sets = append(sets, kv[0]+"="+kv[1])
			}
		}
		k, err := core.ParseKnobs(sets)
		if err != nil {
			return
		}
		p, err := FromKnobs(k)
		if err != nil {
			if !strings.Contains(err.Error(), "themis.") {
				t.Fatalf("error names no knob: %v", err)
			}
			return
		}
		if !(p.Fairness >= 0 && p.Fairness <= 1) || !(p.Lease > 0) || math.IsInf(p.Lease, 0) {
			t.Fatalf("f %v, lease %v accepted from %q", p.Fairness, p.Lease, sets)
		}
		for app, x := range p.Lie {
			if !(x > 0) || math.IsInf(x, 0) {
				t.Fatalf("lie factor %v for %q accepted from %q", x, app, sets)
			}
		}
	})
}
