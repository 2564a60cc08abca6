package nomad

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// A job the planner suspended (count 0, themis.suspended) is dead to Nomad
// but not finished to the planner; a count of 0 without the planner's mark
// is the user's, and rejected.
func TestSuspendedJobIsNotFinished(t *testing.T) {
	ok := []any{map[string]any{"gpus": 2.0}}
	mk := func(count int, status string, stop bool, meta map[string]string) *api.Job {
		j := jobWith(&api.TaskGroup{Name: ptr("g"), Count: ptr(count), Tasks: []*api.Task{themisTask("t", ok)}})
		j.Status, j.Stop, j.Meta = ptr(status), ptr(stop), meta
		return j
	}
	suspended := map[string]string{SuspendedMeta: "lease-1", CountMeta: "1"}
	cases := []struct {
		name                 string
		job                  *api.Job
		finished, suspend    bool
		rejected, userStoped bool
	}{
		{"running", mk(1, "running", false, nil), false, false, false, false},
		{"finished", mk(1, "dead", false, nil), true, false, false, false},
		{"suspended", mk(0, "dead", false, suspended), false, true, false, false},
		{"suspended, then stopped by the user", mk(0, "dead", true, suspended), true, true, false, true},
		{"count 0 by the user", mk(0, "dead", false, nil), true, false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJob(tc.job)
			if err != nil {
				t.Fatal(err)
			}
			if got := j.Finished(); got != tc.finished {
				t.Errorf("Finished() = %v, want %v", got, tc.finished)
			}
			if got := j.SuspendedLease() != ""; got != tc.suspend {
				t.Errorf("suspended = %v, want %v", got, tc.suspend)
			}
			if got := j.Err != nil; got != tc.rejected {
				t.Errorf("rejected = %v (%v), want %v", got, j.Err, tc.rejected)
			}
			if got := j.Stopped(); got != tc.userStoped {
				t.Errorf("Stopped() = %v, want %v", got, tc.userStoped)
			}
		})
	}
}

func TestAllocRanFor(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	cases := []struct {
		name string
		a    Alloc
		want time.Duration
	}{
		{"not started", Alloc{ClientStatus: "pending"}, 0},
		{"running", Alloc{ClientStatus: "running", Started: t0}, time.Minute},
		{"finished", Alloc{ClientStatus: "complete", Started: t0, Finished: t0.Add(20 * time.Second)}, 20 * time.Second},
		{"lost without a finish time", Alloc{ClientStatus: "lost", Started: t0}, 0},
		{"restarted: finish before start means running", Alloc{ClientStatus: "running", Started: t0.Add(30 * time.Second), Finished: t0}, 30 * time.Second},
	}
	for _, tc := range cases {
		if got := tc.a.RanFor(now); got != tc.want {
			t.Errorf("%s: RanFor = %s, want %s", tc.name, got, tc.want)
		}
	}
}
