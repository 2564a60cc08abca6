package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/lease"
)

// A workload's progress file reaches Consul through the driver, with the
// rate the driver measured, and `themis status` shows it.
func TestProgressReachesConsul(t *testing.T) {
	const id = "e2e-progress"
	register(t, helloJob(t, id, 300, 1))
	var last *lease.ProgressRecord
	eventually(t, 60*time.Second, "a progress record with a rate", func() (bool, error) {
		last = readKV[lease.ProgressRecord](t, env.consul, lease.ProgressKey("default", id))
		if last == nil || last.Rate <= 0 || last.Iteration < 20 {
			return false, fmt.Errorf("progress record %+v", last)
		}
		return true, nil
	})
	if last.Total != 300 || last.Loss == nil || last.AllocID == "" {
		t.Fatalf("progress record %+v: want a total of 300, a loss and the allocation", last)
	}
	// hello steps every 100 ms: about 10 iterations a second.
	if last.Rate < 2 || last.Rate > 20 {
		t.Fatalf("rate %.2f it/s, want about 10", last.Rate)
	}
	if left := last.Remaining(); left <= 0 || left > 300 {
		t.Fatalf("remaining %.1f s", left)
	}
}
