package quota

import (
	"slices"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
)

// TestFirstFitIgnoresTopology: YARN-CS's first fit takes the first node
// with room (best fit would take the fuller one), and spreads a gang no
// node holds over the first free GPUs; quotas cap both fits alike.
func TestFirstFitIgnoresTopology(t *testing.T) {
	cl, err := cluster.Uniform("two", 1, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	place := func(fit Fit, busy []string, gpus int) (core.Grant, bool) {
		free := core.NewFreeGPUs(cl.Nodes, []core.Grant{{Job: core.JobKey{ID: "busy"}, Node: cl.Nodes[1].ID, GPUs: busy}})
		q := NewFit(map[string]int{"a": 16}, fit)
		g, ok, _ := q.Place(&core.Job{Key: core.JobKey{ID: "j"}, VC: "a", GPUs: gpus}, free, func(core.JobKey) {})
		return g, ok
	}
	n0, n1 := cl.Nodes[0], cl.Nodes[1]
	// Node 1 is half busy: best fit takes it for 4 GPUs, first fit node 0.
	busy := []string{n1.GPUs[0].ID, n1.GPUs[1].ID, n1.GPUs[2].ID, n1.GPUs[3].ID}
	if g, ok := place(BestFit, busy, 4); !ok || g.Node != n1.ID {
		t.Errorf("best fit: %+v %v, want node %s", g, ok, n1.ID)
	}
	if g, ok := place(FirstFit, busy, 4); !ok || g.Node != n0.ID {
		t.Errorf("first fit: %+v %v, want node %s", g, ok, n0.ID)
	}
	// 10 GPUs: node 0's 8, then node 1's first free two.
	g, ok := place(FirstFit, busy, 10)
	if !ok || len(g.GPUs) != 10 || !slices.Contains(g.GPUs, n1.GPUs[4].ID) || slices.Contains(g.GPUs, n1.GPUs[6].ID) {
		t.Errorf("first fit of 10: %+v %v", g, ok)
	}
	q := NewFit(map[string]int{"a": 4}, FirstFit)
	if _, ok, why := q.Place(&core.Job{Key: core.JobKey{ID: "j"}, VC: "a", GPUs: 8}, core.NewFreeGPUs(cl.Nodes, nil), func(core.JobKey) {}); ok {
		t.Errorf("8 GPUs over a quota of 4 placed (%s)", why)
	}
}

// TestAffinityPacksSameSize: Gandiva's affinity puts a job beside jobs of
// its size, else on an idle node, else on the least loaded node.
func TestAffinityPacksSameSize(t *testing.T) {
	cl, err := cluster.Uniform("three", 1, 3, 8)
	if err != nil {
		t.Fatal(err)
	}
	q := NewFit(map[string]int{"a": 24}, Affinity)
	var grants []core.Grant
	place := func(id string, gpus int) core.Grant {
		t.Helper()
		free := core.NewFreeGPUs(cl.Nodes, grants)
		g, ok, why := q.Place(&core.Job{Key: core.JobKey{ID: id}, VC: "a", GPUs: gpus}, free, func(core.JobKey) {})
		if !ok {
			t.Fatalf("%s: %s", id, why)
		}
		grants = append(grants, g)
		return g
	}
	n := func(i int) string { return cl.Nodes[i].ID }
	if g := place("two", 2); g.Node != n(0) {
		t.Errorf("first 2-GPU job on %s, want idle %s", g.Node, n(0))
	}
	if g := place("one", 1); g.Node != n(1) {
		t.Errorf("1-GPU job on %s, want idle %s (not beside the 2-GPU job)", g.Node, n(1))
	}
	if g := place("two-b", 2); g.Node != n(0) {
		t.Errorf("second 2-GPU job on %s, want %s beside the first", g.Node, n(0))
	}
	if g := place("four", 4); g.Node != n(2) {
		t.Errorf("4-GPU job on %s, want idle %s", g.Node, n(2))
	}
	// No idle node, none running only 3-GPU jobs: the least loaded (node
	// 1 has 7 free).
	if g := place("three", 3); g.Node != n(1) {
		t.Errorf("3-GPU job on %s, want least loaded %s", g.Node, n(1))
	}
	q.Release(core.JobKey{ID: "one"})
	q.Release(core.JobKey{ID: "three"})
	if len(q.sizes[n(1)]) != 0 {
		t.Errorf("node 1 sizes %v after its jobs stopped", q.sizes[n(1)])
	}
}
