package lease

import (
	"net/url"

	"github.com/themis-nomad/themis/planner/core"
)

// The whole KV layout under Root, every key themis writes (values JSON
// unless said otherwise). This package owns it; the planner's Consul
// adapter (planner/consul) reads and writes through these names, the task
// driver reads leases, checkpoints and gangs, and the invariant watcher
// (planner/check) keeps its own decoder on purpose.
//
//	themis/leases/gpus/<gpu-id>              GPULease, one per leased GPU (lease.go)
//	themis/leases/jobs/<ns>/<job>            JobLease, one per granted job (lease.go)
//	themis/leases/pending/<ns>/<job>         Pending: a grant waiting for its GPUs (pending.go)
//	themis/gangs/<ns>/<job>/<lease-id>/...   a gang's parts' barrier (gang.go)
//	themis/checkpoints/<ns>/<job>            CheckpointRecord, written by the driver (checkpoint.go)
//	themis/progress/<ns>/<job>               ProgressRecord, written by the driver (progress.go)
//	themis/jobs/<ns>/<job>                   JobRecord, the planner's job record (jobrecord.go)
//	themis/status/<ns>/<job>                 JobStatus, the job's status for operators (jobstatus.go)
//	themis/policy/<policy>                   a stateful policy's state (opaque bytes)
//	themis/auction/last                      the last auction round's report (core.RoundReport)
//	themis/planner/leader                    the planners' leader lock (a session)

// RecordPrefix is where the planner keeps what it must remember about a job
// across preemptions and planner restarts (invariant 5, JobRecord):
// Nomad forgets a job's history every time it is re-registered, and
// allocations are garbage-collected.
const RecordPrefix = Root + "jobs/"

// RecordKey is the key of one job's record.
func RecordKey(k core.JobKey) string {
	return RecordPrefix + url.PathEscape(k.Namespace) + "/" + url.PathEscape(k.ID)
}

// StatusPrefix is where job status records live (JobStatus).
const StatusPrefix = Root + "status/"

// StatusKey is the key of one job's status record.
func StatusKey(k core.JobKey) string {
	return StatusPrefix + url.PathEscape(k.Namespace) + "/" + url.PathEscape(k.ID)
}

// PolicyPrefix is where stateful policies keep their state (core.Stateful).
const PolicyPrefix = Root + "policy/"

// PolicyKey is where policy name's state lives, opaque to all but the
// policy.
func PolicyKey(name string) string { return PolicyPrefix + url.PathEscape(name) }

// AuctionKey holds the last auction round's result per app (Themis), for
// operators: the Consul UI and `themis status -apps`.
const AuctionKey = Root + "auction/last"

// LeaderKey is the Consul lock that one planner holds at a time; the others
// wait as standbys. The lock is tied to a Consul session, so if the leader
// dies its session goes and a standby takes over. Leases are not tied to
// the session: running jobs keep their GPUs through a failover.
const LeaderKey = Root + "planner/leader"
