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
