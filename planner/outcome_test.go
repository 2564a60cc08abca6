package planner

import (
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/stack"
)

// A job that ended is finished, failed or lost as its last allocation
// ended, with Nomad's reason; the view (the API's source) and the release
// decision say the same; a failed job stays failed once Nomad has
// garbage-collected its allocations, and a job its user stopped is
// finished.
func TestEndedJobsSayHowTheyEnded(t *testing.T) {
	for _, tc := range []struct {
		name, status, failure string
		gc, stop              bool
		wantState, wantReason string
	}{
		{name: "complete", status: "complete", wantState: StateFinished},
		{name: "failed", status: "failed", failure: `task "t": Driver Failure: permission denied`, wantState: StateFailed,
			wantReason: "permission denied"},
		{name: "lost", status: "lost", failure: "alloc is lost since its node is down", wantState: StateLost, wantReason: "node is down"},
		{name: "failed then collected", status: "failed", failure: `task "t": Terminated: Exit Code: 2`, gc: true, wantState: StateFailed,
			wantReason: "Exit Code: 2"},
		{name: "stopped by its user", status: "failed", failure: "killed", stop: true, wantState: StateFinished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, stack.Of(core.FIFO{}))
			var views []View
			h.config.OnRound = func(v View) { views = append(views, v) }
			h.restart()
			h.fn.submit("a", 2, "be", "10s")
			h.round("grant")
			h.round("running")
			k := jobKey("a")
			if len(h.fn.running("a")) != 1 {
				t.Fatalf("a is not running: %+v", h.fs.statuses[k])
			}
			for _, a := range h.fn.allocs[k] {
				a.ClientStatus, a.Finished, a.Failure = tc.status, *h.fn.clock, tc.failure
			}
			h.fn.jobs[k].Status = ptr("dead")
			if tc.stop {
				h.fn.jobs[k].Stop = ptr(true)
			}
			h.round("ended")
			if tc.gc {
				delete(h.fn.allocs, k)
				h.round("collected")
			}
			st := h.fs.statuses[k]
			if st.State != tc.wantState || !strings.Contains(st.Reason, tc.wantReason) {
				t.Fatalf("status %+v, want %s with a reason containing %q", st, tc.wantState, tc.wantReason)
			}
			v := views[len(views)-1]
			if len(v.Jobs) != 1 || v.Jobs[0].Status.State != tc.wantState {
				t.Errorf("view jobs %+v, want %s", v.Jobs, tc.wantState)
			}
			var release string
			for _, v := range views {
				for _, e := range v.Events {
					if e.Kind == EventRelease {
						release = e.Reason
					}
				}
			}
			if want := "job " + tc.wantState; !strings.HasPrefix(release, want) || !strings.Contains(release, tc.wantReason) {
				t.Errorf("release reason %q, want %q with %q", release, want, tc.wantReason)
			}
		})
	}
}
