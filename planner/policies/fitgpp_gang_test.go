package policies

import (
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// FitGpp live: a TE gang split over nodes that no single preemption lets be
// placed preempts several BE jobs, in Score order, only those that
// contribute, and none if no set makes room; the one-victim rule holds where
// one victim suffices, and the simulator (no equal parts) keeps the paper's
// one-node rule.
func TestFitGppVictimSetForGangs(t *testing.T) {
	n0, n1, n2 := nodeN("n0", "rack0", 8), nodeN("n1", "rack0", 8), nodeN("n2", "rack1", 8)
	on := func(n core.Node, from, k int) []string {
		var out []string
		for i := from; i < from+k; i++ {
			out = append(out, n.GPUs[i].ID)
		}
		return out
	}
	// be is a running BE job of k GPUs from GPU from of node n, grace
	// period gp (Score: the shorter the better, demands being equal).
	type run struct {
		j core.Job
		g core.Grant
	}
	mk := func(id, class string, k int, gp float64, preempted int, n core.Node, from int) run {
		j := with(job(id, k, 1, core.Granted), started(10, 50))
		j.Class, j.GracePeriod, j.Preemptions = class, gp, preempted
		return run{j, grant(id, n.ID, on(n, from, k)...)}
	}
	be := func(id string, k int, gp float64, n core.Node, from int) run {
		return mk(id, core.ClassBestEffort, k, gp, 0, n, from)
	}
	te := job("te", 16, 50, core.Queued)
	te.Class = core.ClassTrialAndError
	cases := []struct {
		name    string
		nodes   []core.Node
		simul   bool // the simulator: no equal parts
		gpus    int  // the TE gang's GPUs (default 16)
		running []run
		// preempted lists the victims in order; granted whether te is.
		preempted string
	}{
		{name: "two nodes, one 8-GPU BE job each: both", nodes: []core.Node{n0, n1},
			running: []run{be("a", 8, 60, n0, 0), be("b", 8, 60, n1, 0)}, preempted: "[a b]"},
		{name: "a node half used by a TE job: none", nodes: []core.Node{n0, n1},
			running:   []run{be("a", 8, 60, n0, 0), mk("t", core.ClassTrialAndError, 4, 60, 0, n1, 0), be("b", 4, 60, n1, 4)},
			preempted: "[]"},
		{name: "three candidate nodes: the two best scored", nodes: []core.Node{n0, n1, n2},
			running:   []run{be("slow", 8, 600, n0, 0), be("mid", 8, 300, n1, 0), be("fast", 8, 60, n2, 0)},
			preempted: "[fast mid]"},
		{name: "a victim that does not contribute is spared", nodes: []core.Node{n0, n1, n2},
			// small scores best, but n0 keeps a TE job: freeing small
			// never frees n0, so only mid and slow go.
			running: []run{be("small", 4, 10, n0, 0), mk("t", core.ClassTrialAndError, 4, 60, 0, n0, 4),
				be("mid", 8, 300, n1, 0), be("slow", 8, 600, n2, 0)},
			preempted: "[mid slow]"},
		{name: "two 4-GPU jobs on a node and one 8-GPU job: all three", nodes: []core.Node{n0, n1},
			running:   []run{be("a1", 4, 60, n0, 0), be("a2", 4, 600, n0, 4), be("b", 8, 300, n1, 0)},
			preempted: "[a1 b a2]"},
		{name: "a job preempted P times is spared: none", nodes: []core.Node{n0, n1},
			running:   []run{be("a", 8, 60, n0, 0), mk("b", core.ClassBestEffort, 8, 60, 1, n1, 0)},
			preempted: "[]"},
		{name: "one victim suffices: the best scored alone", nodes: []core.Node{n0, n1, n2},
			running:   []run{be("slow", 8, 600, n1, 0), be("fast", 8, 60, n2, 0)},
			preempted: "[fast]"},
		{name: "a BE gang and a BE job for a 24-GPU gang", nodes: []core.Node{n0, n1, n2}, gpus: 24,
			running: []run{{func() core.Job { j := be("gang", 8, 60, n0, 0).j; j.GPUs = 16; return j }(),
				core.Grant{Job: core.JobKey{Namespace: "default", ID: "gang"}, GPUs: append(on(n0, 0, 8), on(n1, 0, 8)...)}},
				be("c", 8, 600, n2, 0)},
			preempted: "[gang c]"},
		{name: "simulator: no set across nodes", nodes: []core.Node{n0, n1}, simul: true,
			running: []run{be("a", 8, 60, n0, 0), be("b", 8, 60, n1, 0)}, preempted: "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var jobs []core.Job
			var grants []core.Grant
			for _, r := range c.running {
				jobs, grants = append(jobs, r.j), append(grants, r.g)
			}
			te := te
			if c.gpus > 0 {
				te.GPUs = c.gpus
			}
			jobs = append(jobs, te)
			d := core.Scheduler{Policy: policy(t, "fitgpp"), ExplainWaits: true, EqualParts: !c.simul}.Decide(core.State{Nodes: c.nodes, Jobs: jobs, Grants: grants}, time.Unix(100, 0))
			checkRoomFor(t, d, c.preempted)
		})
	}
}
