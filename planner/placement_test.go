package planner

import (
	"math"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// A progress report's rate is measured where the job runs; the core counts
// remaining time at full speed: a job spread over nodes (of one rack, or
// of several) reports a slower rate, and its remaining time and work are
// what they would be on one node. A report from an allocation that no
// longer runs is taken as it is.
func TestProgressAtFullSpeed(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	nodes := map[string]core.Node{"a": {ID: "a", Rack: "r1"}, "b": {ID: "b", Rack: "r1"}, "c": {ID: "c", Rack: "r2"}}
	k := core.JobKey{Namespace: "default", ID: "j"}
	job := core.Job{Key: k, Skew: 1.2, CrossRack: 1.6, Remaining: -1}
	for _, tc := range []struct {
		name   string
		on     []string
		status string
		slow   float64
	}{
		{"one node", []string{"a"}, "running", 1},
		{"one rack", []string{"a", "b"}, "running", 1.2},
		{"two racks", []string{"a", "c"}, "running", 1.6},
		{"an earlier allocation", []string{"a", "c"}, "complete", 1},
	} {
		var allocs []nomad.Alloc
		for _, n := range tc.on {
			allocs = append(allocs, nomad.Alloc{ID: "alloc-" + n, NodeID: n, ClientStatus: tc.status})
		}
		// 1,000 of 2,000 iterations done, 10 a second on one node (100 s
		// left at full speed), reported 10 s ago at the rate measured there.
		pr := lease.ProgressRecord{Namespace: "default", JobID: "j", AllocID: allocs[0].ID, Iteration: 1000, Total: 2000, Rate: 10 / tc.slow, At: now.Add(-10 * time.Second)}
		got := withProgress(job, map[core.JobKey]lease.ProgressRecord{k: pr}, allocs, nodes, now)
		want, work := 100.0, 200.0 // an earlier allocation: as reported
		if tc.status == "running" {
			want = 100 - 10/tc.slow // it ran 10 s since, at its placement's speed
		}
		if math.Abs(got.Remaining-want) > 1e-9 || math.Abs(got.Work-work) > 1e-9 {
			t.Errorf("%s: remaining %.2f s and work %.2f s at full speed, want %.2f and %.2f", tc.name, got.Remaining, got.Work, want, work)
		}
	}
}
