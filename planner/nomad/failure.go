package nomad

import (
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// Failure says why an allocation failed or was lost, in Nomad's words, for
// `themis status` and the API: the themis task's event that failed it
// (a driver failure such as "permission denied", a non-zero exit), else the
// allocation's description. It is "" for an allocation that did not fail
// (running, complete, pending).
func Failure(clientStatus, description, task string, ts *api.TaskState) string {
	switch clientStatus {
	case api.AllocClientStatusFailed, api.AllocClientStatusLost:
	default:
		return ""
	}
	if ev := failingEvent(ts); ev != nil {
		return fmt.Sprintf("task %q: %s", task, describeEvent(ev))
	}
	if description != "" {
		return description
	}
	return "allocation " + clientStatus
}

// failingEvent is the newest event that says what went wrong: one that
// failed the task, a driver or setup failure, or a non-zero exit. Events
// that only follow a failure ("Not Restarting", "Killing") are passed over.
func failingEvent(ts *api.TaskState) *api.TaskEvent {
	if ts == nil {
		return nil
	}
	for i := len(ts.Events) - 1; i >= 0; i-- {
		ev := ts.Events[i]
		if ev == nil {
			continue
		}
		switch {
		case ev.Type == api.TaskTerminated && ev.ExitCode != 0,
			ev.Type == api.TaskDriverFailure, ev.Type == api.TaskSetupFailure,
			ev.Type == api.TaskFailedValidation, ev.Type == api.TaskArtifactDownloadFailed,
			ev.DriverError != "", ev.ValidationError != "", ev.SetupError != "":
			return ev
		}
	}
	for i := len(ts.Events) - 1; i >= 0; i-- {
		if ev := ts.Events[i]; ev != nil && ev.FailsTask {
			return ev
		}
	}
	return nil
}

// describeEvent is "<type>: <message>", from the most specific message
// the event carries.
func describeEvent(ev *api.TaskEvent) string {
	msg := ev.DisplayMessage
	for _, m := range []string{ev.DriverError, ev.SetupError, ev.ValidationError, ev.DownloadError} {
		if m != "" && !strings.Contains(msg, m) {
			msg = m
			break
		}
	}
	if ev.Type == api.TaskTerminated && msg == "" {
		msg = fmt.Sprintf("exit code %d", ev.ExitCode)
	}
	if msg == "" {
		return ev.Type
	}
	return ev.Type + ": " + msg
}
