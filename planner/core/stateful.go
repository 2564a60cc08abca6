package core

import "time"

// Stateful is implemented by policies that keep state between rounds which
// the adapters cannot rebuild from jobs and grants (Themis's arbiter: lease
// end times, when each app was first seen, the contention average, the
// round counter of its auction's seed). The live planner records the
// exported state in Consul after every decision that changed it and
// imports it into a new policy (a restarted or newly elected planner)
// before its first decision, so that it decides as the old one would have
// (restart equivalence). The state is opaque bytes to everyone but the
// policy.
type Stateful interface {
	ExportState() ([]byte, error)
	ImportState([]byte) error
}

// LeaseEnder is implemented by policies that lease GPUs for a time
// (Themis): LeaseEnd is when the running job's lease ends, which the live
// planner shows in the job's lease key.
type LeaseEnder interface {
	LeaseEnd(job JobKey) (time.Time, bool)
}
