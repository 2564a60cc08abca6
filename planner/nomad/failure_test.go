package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// Failure names what failed an allocation in Nomad's words: the event that
// failed the themis task (not the "Not Restarting" that follows it), else
// the allocation's description; nothing for one that did not fail.
func TestFailure(t *testing.T) {
	ev := func(typ, msg string) *api.TaskEvent { return &api.TaskEvent{Type: typ, DisplayMessage: msg} }
	for _, tc := range []struct {
		name, status, desc string
		ts                 *api.TaskState
		want               string
	}{
		{"complete", "complete", "", &api.TaskState{Events: []*api.TaskEvent{ev(api.TaskTerminated, "Exit Code: 0")}}, ""},
		{"running", "running", "", nil, ""},
		{"driver failure", "failed", "Failed tasks", &api.TaskState{Failed: true, Events: []*api.TaskEvent{
			ev(api.TaskReceived, "Task received by client"),
			{Type: api.TaskDriverFailure, DisplayMessage: "failed to launch command with executor: fork/exec /x: permission denied",
				DriverError: "failed to launch command with executor: fork/exec /x: permission denied", FailsTask: true},
			ev(api.TaskNotRestarting, "Error was unrecoverable"),
		}}, `task "hello": Driver Failure: failed to launch command with executor: fork/exec /x: permission denied`},
		{"non-zero exit", "failed", "Failed tasks", &api.TaskState{Failed: true, Events: []*api.TaskEvent{
			{Type: api.TaskTerminated, DisplayMessage: "Exit Code: 3", ExitCode: 3},
			ev(api.TaskNotRestarting, "Policy allows no restarts"),
		}}, `task "hello": Terminated: Exit Code: 3`},
		{"exit code without message", "failed", "", &api.TaskState{Events: []*api.TaskEvent{{Type: api.TaskTerminated, ExitCode: 9}}},
			`task "hello": Terminated: exit code 9`},
		{"lost", "lost", "alloc is lost since its node is down", nil, "alloc is lost since its node is down"},
		{"failed, no events", "failed", "", &api.TaskState{}, "allocation failed"},
	} {
		if got := Failure(tc.status, tc.desc, "hello", tc.ts); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
