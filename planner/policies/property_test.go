package policies

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// TestPropertyGrantsAreSafe runs every policy through random rounds of
// submissions, completions, health flips and progress, applying its actions
// as an actuator would, and checks after every round: no GPU is granted to
// two jobs, every grant is a whole gang of free healthy GPUs on schedulable
// nodes, only queued jobs are granted and only running jobs preempted, and
// releases and preemptions precede grants.
func TestPropertyGrantsAreSafe(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	for _, name := range testNames {
		t.Run(name, func(t *testing.T) {
			for trial := int64(0); trial < 10; trial++ {
				runProperty(t, name, trial, rounds)
			}
		})
	}
}

func runProperty(t *testing.T, name string, seed int64, rounds int) {
	rng := rand.New(rand.NewSource(seed))
	knobs, _ := core.ParseKnobs([]string{"tiresias.queues=100,400", "tiresias.promote_knob=2"})
	if name != "tiresias-las" && name != "tiresias-gittins" {
		knobs, _ = core.ParseKnobs(nil)
	}
	pol, err := newPolicy(name, knobs)
	if err != nil {
		t.Fatal(err)
	}
	// twin decides each round with State.GrantJobs, correct or (every
	// fifth round) wrong, and State.Free, and must decide as pol does
	// without them.
	twin, err := newPolicy(name, knobs)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []core.Node{node8("n0"), node8("n1"), node8("n2"), node8("n3")}
	nodes[2].Rack, nodes[3].Rack = "r1", "r1"
	single := rng.Intn(2) == 0
	var jobs []core.Job
	grants := map[core.JobKey]core.Grant{}
	seq := 0
	now := time.Unix(0, 0)
	for r := 0; r < rounds; r++ {
		now = now.Add(time.Duration(1+rng.Intn(100)) * time.Second)
		for e := rng.Intn(3); e > 0; e-- {
			seq++
			j := job(fmt.Sprintf("j%d", seq), 1+rng.Intn(12), int(now.Unix()), core.Queued)
			j.Remaining = float64(rng.Intn(500))
			j.Skew = 1 + rng.Float64()
			jobs = append(jobs, j)
		}
		for i := range jobs {
			j := &jobs[i]
			if j.Phase == core.Granted {
				j.Executed += 10
				j.Attained += 10 * float64(j.GPUs)
				if rng.Intn(4) == 0 {
					j.Phase = core.Finished
				}
			} else {
				j.Waited += 10
			}
		}
		n := &nodes[rng.Intn(len(nodes))]
		n.GPUs[rng.Intn(8)].Healthy = rng.Intn(5) != 0
		n.Schedulable = rng.Intn(10) != 0

		var gs []core.Grant
		for _, g := range grants {
			gs = append(gs, g)
		}
		d := core.Scheduler{Policy: pol, SingleNode: single}.Decide(core.State{Nodes: nodes, Jobs: jobs, Grants: gs}, now)
		gj := make([]int, len(gs))
		for gi, g := range gs {
			gj[gi] = slices.IndexFunc(jobs, func(j core.Job) bool { return j.Key == g.Job })
		}
		if len(gj) > 0 && r%5 == 4 {
			gj[rng.Intn(len(gj))] = rng.Intn(len(jobs)+2) - 1
		}
		// ... and with State.Free, right or (every third round) missing a
		// grant, when Decide must take them all itself.
		idx := core.NewClusterIndex(nodes)
		kept := idx.Free(gs)
		if len(gs) > 0 && r%3 == 1 {
			kept = idx.Free(gs[1:])
		}
		if dt := (core.Scheduler{Policy: twin, SingleNode: single}).Decide(core.State{Nodes: nodes, Jobs: jobs, Grants: gs, GrantJobs: gj, Index: idx, Free: kept}, now); decisionString(dt) != decisionString(d) {
			t.Fatalf("%s round %d: with GrantJobs %v\n%s\nwithout\n%s", name, r, gj, decisionString(dt), decisionString(d))
		}
		byKey := map[core.JobKey]*core.Job{}
		for i := range jobs {
			byKey[jobs[i].Key] = &jobs[i]
		}
		// Apply releases and preemptions first, checking the order.
		seenGrant := false
		for _, a := range d.Actions {
			switch a := a.(type) {
			case core.ReleaseAction:
				if seenGrant {
					t.Fatal("release after a grant")
				}
				delete(grants, a.Grant.Job)
			case core.PreemptAction:
				if seenGrant {
					t.Fatal("preemption after a grant")
				}
				j := byKey[a.Grant.Job]
				if j == nil || j.Phase != core.Granted {
					t.Fatalf("preempted a job that is not running: %v", a.Grant)
				}
				if !pol.Preemptive() {
					t.Fatalf("%s is not preemptive but preempted %v", name, a.Grant)
				}
				delete(grants, a.Grant.Job)
				j.Phase = core.Queued
				j.Preemptions++
			case core.PromoteAction:
				byKey[a.Job].Executed, byKey[a.Job].Waited = 0, 0
			case core.GrantAction:
				seenGrant = true
			}
		}
		// Free GPUs after releases and preemptions.
		var held []core.Grant
		for _, g := range grants {
			held = append(held, g)
		}
		free := map[string]*core.Node{}
		freeNodes := core.NewFreeGPUs(nodes, held).FreeNodes()
		for i := range freeNodes {
			for _, g := range freeNodes[i].GPUs {
				free[g.ID] = &freeNodes[i]
			}
		}
		for _, a := range d.Actions {
			ga, ok := a.(core.GrantAction)
			if !ok {
				continue
			}
			g := ga.Grant
			j := byKey[g.Job]
			if j == nil || j.Phase != core.Queued {
				t.Fatalf("granted a job that is not queued: %v", g)
			}
			if len(g.GPUs) != j.GPUs {
				t.Fatalf("gang broken: %s wants %d, got %v", j.Key, j.GPUs, g.GPUs)
			}
			onNodes := map[string]bool{}
			for _, id := range g.GPUs {
				node, ok := free[id]
				if !ok {
					t.Fatalf("round %d: granted GPU %s, not free (double grant, unhealthy or unschedulable)", r, id)
				}
				onNodes[node.ID] = true
				delete(free, id)
			}
			if (single || g.Node != "") && (len(onNodes) != 1 || (g.Node != "" && !onNodes[g.Node])) {
				t.Fatalf("grant %v: node %q but GPUs on %v", g, g.Node, onNodes)
			}
			j.Phase = core.Granted
			j.Started = true
			grants[g.Job] = g
		}
		var live []core.Job
		for _, j := range jobs {
			if j.Phase != core.Finished {
				live = append(live, j)
			}
		}
		jobs = live
	}
}

// decisionString is a decision's actions and waits, one a line.
func decisionString(d core.Decision) string {
	var b strings.Builder
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.GrantAction:
			fmt.Fprintf(&b, "grant %v\n", a.Grant)
		case core.ReleaseAction:
			fmt.Fprintf(&b, "release %v\n", a.Grant)
		case core.PreemptAction:
			fmt.Fprintf(&b, "preempt %v\n", a.Grant)
		case core.PromoteAction:
			fmt.Fprintf(&b, "promote %v\n", a.Job)
		}
	}
	for _, w := range d.Waits {
		fmt.Fprintf(&b, "wait %v: %s\n", w.Job, w.Reason)
	}
	return b.String()
}
