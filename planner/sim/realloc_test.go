package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/sim/leased"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

// TestReallocAtLeaseEnds: as TestPreemptionCost's scene under las, but with
// sim.realloc=60s B waits for A's lease to end at 60 (not its arrival at
// 40) before it preempts A, and A resumes at 110 after B (50 s) with its
// 40 s left after checkpoint and restore (30 s): it ends at 180.
func TestReallocAtLeaseEnds(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{
		{ID: "A", GPUs: 8, Duration: 100, Model: "resnet50"},
		{ID: "B", GPUs: 8, Duration: 50, Submit: 40, Model: "resnet50"},
	}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	k, err := core.ParseKnobs([]string{leased.Knob + "=60s"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Build("las", stack.Options{Knobs: k})
	if err != nil {
		t.Fatal(err)
	}
	pol := st.Policy
	if _, ok := pol.(*leased.Policy); !ok {
		t.Fatalf("stack.Build(las, sim.realloc=60s) = %T, want a *leased.Policy", pol)
	}
	if err := st.Live(); err == nil || !strings.Contains(err.Error(), "sim.realloc") {
		t.Errorf("Live() = %v, want sim.realloc refused live", err)
	}
	r := run(t, Config{Trace: tr, Cluster: cl, Policy: pol, CheckpointCost: 10, RestoreCost: 20})
	a, b := r.Jobs[0], r.Jobs[1]
	if math.Abs(b.Start-60) > tol || math.Abs(b.End-110) > tol || math.Abs(a.End-180) > tol {
		t.Errorf("B runs %v-%v, A ends %v; want B 60-110 and A at 180", b.Start, b.End, a.End)
	}
	if r.Preemptions != 1 {
		t.Errorf("preemptions %d, want 1", r.Preemptions)
	}
}
