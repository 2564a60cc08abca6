package policies

import (
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// Optimus ranks by remaining time x GPUs x skew, least first; unknown
// remaining times last.
func TestOptimusRank(t *testing.T) {
	mk := func(id string, gpus int, rem, skew float64) *core.Job {
		return &core.Job{Key: core.JobKey{Namespace: "default", ID: id}, GPUs: gpus, Remaining: rem, Skew: skew}
	}
	jobs := []*core.Job{
		mk("unknown", 1, -1, 1),
		mk("big", 8, 100, 1),    // 800
		mk("skewed", 2, 100, 2), // 400
		mk("plain", 2, 150, 1),  // 300
		mk("noskew", 1, 350, 0), // 350 (skew 0 counts as 1)
	}
	Optimus{}.Rank(time.Unix(0, 0), jobs)
	want := []string{"plain", "noskew", "skewed", "big", "unknown"}
	for i, j := range jobs {
		if j.Key.ID != want[i] {
			t.Fatalf("rank %d = %s, want %v", i, j.Key.ID, want)
		}
	}
	if p, err := newPolicy("optimus", core.Knobs{}); err != nil || p.Name() != "optimus" || !p.Preemptive() {
		t.Errorf("newPolicy(optimus) = %v, %v", p, err)
	}
}
