package nomad

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Nomad resets a task's StartedAt at every restart: a task that exits 1
// and is restarted (restart { mode = "delay" }) showed only the service
// since its last start, so a preemptive policy ranked it as new forever
// and a resumed job's restore guard never ran out while it held its GPUs.
// An allocation whose task restarted is counted from the allocation's
// creation (its whole life holding the GPUs) to its end, or now.
func TestRestartsDoNotResetService(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	j := &Job{Task: "t"}
	stub := func(status string, restarts uint64, started, finished time.Duration) *api.AllocationListStub {
		return &api.AllocationListStub{ID: "a", ClientStatus: status, CreateTime: t0.UnixNano(),
			TaskStates: map[string]*api.TaskState{"t": {State: "running", Restarts: restarts, StartedAt: t0.Add(started), FinishedAt: t0.Add(finished)}}}
	}
	cases := []struct {
		name string
		s    *api.AllocationListStub
		want time.Duration
	}{
		{"never restarted", stub("running", 0, 5*time.Second, -t0.Sub(time.Time{})), 55 * time.Second},
		{"restarted 5 times, running again", stub("running", 5, 50*time.Second, 45*time.Second), time.Minute},
		{"restarted, in its restart delay", stub("running", 3, 30*time.Second, 40*time.Second), time.Minute},
		{"restarted, then finished", stub("complete", 2, 30*time.Second, 50*time.Second), 50 * time.Second},
	}
	for _, tc := range cases {
		if got := allocOf(tc.s, j).RanFor(now); got != tc.want {
			t.Errorf("%s: ran for %s, want %s", tc.name, got, tc.want)
		}
	}
}
