package planner

import (
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// act plans the decision's actions in order (releases, promotions,
// preemptions, grants), then the pending grants whose GPUs are free, and
// sets the statuses of the jobs the decision leaves waiting.
func (p *Planner) act(r *round, d core.Decision) {
	for _, a := range d.Actions {
		if k, ok := takesBack(a); ok {
			if _, ok := r.pending[k]; ok {
				// Its GPUs were never leased to it: nothing to take back.
				r.withdraw(k, "taken back before its GPUs were released")
				r.status[k] = lease.JobStatus{State: "queued", Reason: "its pending grant was taken back", Preemptions: r.records[k].Preemptions}
				continue
			}
		}
		switch a := a.(type) {
		case core.ReleaseAction:
			l := r.leases[a.Grant.Job]
			if p.stillRunning(r, a.Grant.Job, l) {
				p.markHeld(r, l)
				continue
			}
			r.learn(a.Grant.Job, l)
			r.learned = true
			r.release(l, nil, endReason(r.status[a.Grant.Job]))
			r.dropRecord(a.Grant.Job)
		case core.PromoteAction:
			p.promote(r, a.Job)
		case core.PreemptAction:
			p.preempt(r, a.Grant, d)
		case core.GrantAction:
			if _, ok := r.leases[a.Grant.Job]; ok && p.defers() {
				// Moved (preempted and granted elsewhere in one round):
				// it checkpoints first, then resumes there.
				p.pend(r, a.Grant, ReasonMoving+"checkpointing before it resumes on "+r.nodeNames(a.Grant))
				continue
			}
			if _, ok := r.leases[a.Grant.Job]; ok {
				// Moved (preempted and granted elsewhere in one round):
				// it checkpoints first; the round after its release
				// grants it again.
				r.status[a.Grant.Job] = lease.JobStatus{State: "queued", Reason: ReasonMoving + "checkpointing before it resumes elsewhere", Preemptions: r.records[a.Grant.Job].Preemptions}
				continue
			}
			if victim, ok := p.heldBy(r, a.Grant); ok && p.defers() {
				p.pend(r, a.Grant, r.waitingFor(victim, r.nodeNames(a.Grant), a.Grant))
				continue
			}
			if victim, ok := p.heldBy(r, a.Grant); ok {
				r.status[a.Grant.Job] = lease.JobStatus{State: "queued", Reason: r.waitingFor(victim, r.nodeNames(a.Grant), a.Grant)}
				continue
			}
			p.grant(r, a.Grant)
		}
	}
	p.carryOut(r)
	asideNote := r.asideNote()
	for _, w := range d.Waits {
		st := lease.JobStatus{State: "queued", Reason: w.Reason + asideNote}
		if j := r.jobs[w.Job]; j != nil && r.own(j).suspended != "" {
			st.State = "suspended"
		}
		st.Preemptions = r.records[w.Job].Preemptions
		r.status[w.Job] = st
	}
}
