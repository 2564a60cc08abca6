package planner

import (
	"cmp"
	"slices"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// Job states a finished job ends in. A job Nomad reports dead (and the
// planner did not suspend) ended one of three ways, and themis says which,
// as the API, the metrics and the dashboard do: its last allocation
// completed (finished), failed (failed, with Nomad's reason: a driver
// failure, a non-zero exit) or was lost with its node (lost). A job its
// user stopped is finished.
const (
	StateFinished = "finished"
	StateFailed   = "failed"
	StateLost     = "lost"
)

// Ended reports whether a status is one a job ends in.
func Ended(state string) bool {
	return state == StateFinished || state == StateFailed || state == StateLost
}

// endStatus is a finished job's status from its allocations: the newest
// one decides. Once Nomad has garbage-collected them, the job keeps the
// failed or lost status it had.
func (p *Planner) endStatus(r *round, j *nomad.Job) lease.JobStatus {
	allocs := r.snap.Allocs[j.Key]
	if j.Stopped() || len(allocs) == 0 {
		if prev := p.statuses[j.Key]; !j.Stopped() && (prev.State == StateFailed || prev.State == StateLost) {
			return lease.JobStatus{State: prev.State, Reason: prev.Reason}
		}
		return lease.JobStatus{State: StateFinished}
	}
	last := slices.MaxFunc(allocs, func(a, b nomad.Alloc) int { return a.Created.Compare(b.Created) })
	st := lease.JobStatus{State: StateFinished}
	switch last.ClientStatus {
	case "failed":
		st.State, st.Reason = StateFailed, last.Failure
	case "lost":
		st.State, st.Reason = StateLost, last.Failure
	}
	return st
}

// endReason is how a lease's release reads for a job that ended: "job
// finished", or "job failed: <Nomad's reason>" ("job lost: ...").
func endReason(st lease.JobStatus) string {
	state := cmp.Or(st.State, StateFinished)
	if st.Reason == "" || !Ended(state) {
		return "job " + StateFinished
	}
	return "job " + state + ": " + st.Reason
}
