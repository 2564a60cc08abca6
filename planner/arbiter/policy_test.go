package arbiter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
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
	d := core.Scheduler{Policy: p}.Decide(core.State{Nodes: nodes, Jobs: jobs, Grants: held}, at(now))
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
