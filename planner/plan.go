package planner

import (
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// A plan is what one round is to write, in order: the typed steps that
// reconcile (reconcile.go) derives from the world as read (world.go), and
// that apply (apply.go), the only code that writes, carries out. The order
// is the order the invariants need (a revoke mark before the suspension
// that it names, a release before the grant of its GPUs, a pending grant
// recorded before any GPU it waits for is released, the policy's state
// recorded before the decision is acted on), and every step is idempotent
// against the next round's reading of Consul and Nomad, so a planner
// stopped after any step is finished by the next round.

// stepKind says what a step writes.
type stepKind string

const (
	// stepRevoke marks Lease as taken back (Store.Revoke with Revoke).
	stepRevoke stepKind = "revoke"
	// stepSetVersions records on Lease the job versions the planner
	// registers under it (Store.SetVersions; own.go).
	stepSetVersions stepKind = "set-versions"
	// stepSuspend re-registers Job with count 0 under Lease (Nomad).
	stepSuspend stepKind = "suspend"
	// stepRelease deletes Lease's keys, writing Record with them when set.
	stepRelease stepKind = "release"
	// stepWithdraw deletes a pending grant that no longer stands.
	stepWithdraw stepKind = "withdraw"
	// stepPend records Pending, a grant that waits for its GPUs.
	stepPend stepKind = "pend"
	// stepGrant writes Lease (check-and-set: no GPU leased twice), then
	// pins Job to it; a job changed meanwhile has the lease released.
	stepGrant stepKind = "grant"
	// stepDropPending deletes a pending grant carried out by the grant
	// before it.
	stepDropPending stepKind = "drop-pending"
	// stepPin pins Job to Lease (granted, never pinned).
	stepPin stepKind = "pin"
	// stepAdopt moves Job into the pending node pool.
	stepAdopt stepKind = "adopt"
	// stepHold registers a waiting job with nothing to place (its record
	// of the hold written by the stepPutRecord before it), stepTag tags
	// the held version (Why: the tag's description), stepUntag removes
	// the tag of a hold undone.
	stepHold  stepKind = "hold"
	stepTag   stepKind = "tag"
	stepUntag stepKind = "untag"
	// stepPutRecord writes Record (created the first time the planner
	// sees the job); stepPromote writes a starvation promotion into it.
	stepPutRecord stepKind = "put-record"
	stepPromote   stepKind = "promote"
	// stepDropRecord deletes a finished job's records.
	stepDropRecord stepKind = "drop-record"
	// stepRenew writes Lease's new end (Store.SetLeaseEnd).
	stepRenew stepKind = "renew"
	// stepLearn tells the policy the size of a finished job (Learn
	// GPU-seconds in Lease's virtual cluster).
	stepLearn stepKind = "learn"
	// stepSaveState records the policy's state before the decision is
	// acted on; when it fails, the round stops there.
	stepSaveState stepKind = "save-state"
	// stepAuction logs and records the policy's last auction (Auction).
	stepAuction stepKind = "auction"
	// stepCarriedOut tells the policy that the round carried out its
	// decision and records its state when that, or what it learned,
	// changed it.
	stepCarriedOut stepKind = "carried-out"
	// stepStatuses writes the jobs' statuses (plan.status, as the steps
	// before it left them).
	stepStatuses stepKind = "statuses"
)

// step is one write. Job is the job it is about (zero for the policy's
// and the statuses' steps); the fields its kind does not use are zero.
type step struct {
	Kind stepKind
	Job  core.JobKey
	// Nomad is the job as read, for the Nomad writes.
	Nomad   *nomad.Job
	Lease   lease.JobLease
	Revoke  lease.Revoke
	Record  *lease.JobRecord
	Pending lease.Pending
	// Pool is the node pool a pin moves the job to; PoolErr says why the
	// lease's nodes give none (the pin fails, the lease stands).
	Pool    string
	PoolErr error
	// Restarts is the job's preemptions, which a pin records.
	Restarts int
	// Why is the reason logged with the step.
	Why string
	// Learn is the GPU-seconds a finished job received (stepLearn),
	// Learned that the round learned something (stepCarriedOut).
	Learn   float64
	Learned bool
	// Auction is the recorded auction round (stepAuction).
	Auction *core.RoundReport
}

// frees is the GPUs a step makes free (a release): a grant of any of them
// later in the plan depends on it.
func (s step) frees() []string {
	if s.Kind == stepRelease {
		return s.Lease.GPUs
	}
	return nil
}

// needs is the GPUs a step leases.
func (s step) needs() []string {
	if s.Kind == stepGrant {
		return s.Lease.GPUs
	}
	return nil
}

// plan is one round's reconcile: the steps, the statuses they leave, what
// the round failed to plan, and the model it planned on (for the View).
type plan struct {
	steps []step
	// errs are what could not be planned (a grant whose GPUs Nomad does
	// not report, a preemption of a lease Consul does not have): the
	// round fails with them after carrying out the rest.
	errs []error
	// fatal, when set, ends the round after the steps so far, without a
	// decision (the virtual clusters could not be built).
	fatal error
	// status is every job's status after the steps, as planned.
	status map[core.JobKey]lease.JobStatus
	// recheck is when the policy's ranking next changes with time alone.
	recheck time.Time
	// steady says the decision stands until until (zero: for ever) while
	// nothing but the clock moves (steady.go); false: it cannot be said.
	steady bool
	until  time.Time
	// state and decision are the decision core's input and answer; r is
	// the round's model of the world after the steps.
	state    core.State
	decision core.Decision
	r        *round
}

// add appends a step.
func (pl *plan) add(s step) { pl.steps = append(pl.steps, s) }

// kinds is the plan's steps as "kind job" lines, for tests and debugging.
func (pl *plan) kinds() []string {
	out := make([]string, 0, len(pl.steps))
	for _, s := range pl.steps {
		line := string(s.Kind)
		if s.Job != (core.JobKey{}) {
			line += " " + s.Job.String()
		}
		out = append(out, line)
	}
	return out
}
