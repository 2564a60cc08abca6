package planner

import (
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/policies"
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
			h := newHarness(t, 8, stack.Of(policies.FIFO{}))
			var views []View
			h.config.OnRound = func(v View) { views = append(views, v) }
			h.Restart()
			h.Nomad.Submit("a", 2, "be", "10s")
			h.Round("grant")
			h.Round("running")
			k := jobKey("a")
			if len(h.Nomad.Running("a")) != 1 {
				t.Fatalf("a is not running: %+v", h.Store.JobStatuses[k])
			}
			for _, a := range h.Nomad.Allocs[k] {
				a.ClientStatus, a.Finished, a.Failure = tc.status, *h.Nomad.Clock, tc.failure
			}
			h.Nomad.Jobs[k].Status = ptr("dead")
			if tc.stop {
				h.Nomad.Jobs[k].Stop = ptr(true)
			}
			h.Round("ended")
			if tc.gc {
				delete(h.Nomad.Allocs, k)
				h.Round("collected")
			}
			st := h.Store.JobStatuses[k]
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
