package httpapi

import (
	"strings"

	"github.com/themis-nomad/themis/planner"
)

// The views' one vocabulary of job states. A job is granted while it holds
// a lease (in /v1/jobs, /v1/leases and themis status alike) and revoking
// while its lease is taken back. A job the planner has granted GPUs that
// another job still holds (the victim checkpoints and stops), or that
// checkpoints before it resumes on other GPUs, is recorded as queued with
// a reason that says so ("granted 2 GPUs on node-1; waiting for
// default/x to stop", "moving: checkpointing before it resumes on
// node-2"); the views show it as waiting, neither queued (its turn has
// come) nor granted (it holds no lease yet).

// StateWaiting is a job granted GPUs that are not yet free.
const StateWaiting = "waiting"

// ShownState is the state the views show for a job's recorded state and
// reason: waiting for a queued job whose grant waits for its GPUs, else
// the recorded state.
func ShownState(state, reason string) string {
	if state == "queued" && (strings.HasPrefix(reason, planner.ReasonGranted) || strings.HasPrefix(reason, planner.ReasonMoving)) {
		return StateWaiting
	}
	return state
}
