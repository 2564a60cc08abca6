package lease

import "time"

// Hold is a job the planner holds in Nomad while it waits for GPUs: its
// group counts at 0, in the pending pool, so that Nomad has nothing to
// place and keeps no blocked evaluation for it, and its held version
// tagged (HeldTag) so that Nomad's job garbage collection keeps it
// (docs/design.md, "Held jobs"). Written into the job's record before the
// registration it names, and trusted over anything the job says of
// itself: a job is held only at Version, with nothing to place.
type Hold struct {
	// ID names the hold: the hold writes it into the job's meta
	// (themis.held), the lease ID of the suspension it follows
	// (themis.suspended). A registration of the same version number by
	// someone else (between the record and the hold) does not carry it.
	ID string `json:"id"`
	// Version is the job version the hold registered: the planner's hold
	// of a queued job, or its suspension of a preempted one.
	Version JobVersion `json:"version"`
	// Counts are the job's group counts before the hold (by group name),
	// which the pin gives back to the groups other than the themis one
	// (whose count is the lease's). Empty for a suspension, which stops
	// only the themis group.
	Counts map[string]int `json:"counts,omitempty"`
	// Reason is why it is held: "queued", or the reason its lease was
	// taken back ("preempted by fitgpp for default/te").
	Reason string `json:"reason"`
	// Since is when the planner held it.
	Since time.Time `json:"since"`
}

// HoldQueued is a Hold's Reason for a job held since it was first queued
// (or adopted from another node pool).
const HoldQueued = "queued"
