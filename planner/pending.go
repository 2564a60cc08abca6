package planner

import (
	"fmt"
	"slices"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// A queued job whose grant waits for GPUs a stopping job still holds has a
// reason that starts with ReasonGranted; one that checkpoints before it
// resumes on other GPUs, with ReasonMoving. The views show both as
// waiting (httpapi.ShownState), so the reasons are built from these.
const (
	ReasonGranted = "granted "
	ReasonMoving  = "moving: "
)

// Grants that wait for their GPUs, under a leasing policy (Themis). The
// simulator carries out an auction's answer at once: a job whose lease
// ends stops and the winner starts on its GPUs in the same instant, and a
// job the auction moves stops and starts elsewhere in that instant. Live,
// the GPUs are free only once the stopping job has checkpointed. Deciding
// again every round until then would not carry out the auction: each
// round is an auction of its own (another tie-break, another answer), and
// the lease, counted from the late grant, would end rounds after the
// others of its auction, so that the next lease ends are auctioned apart.
// So a grant on held GPUs (a victim still stopping, or the job's own
// allocation checkpointing before it moves) is recorded as pending
// (lease.Pending, themis/leases/pending/) before the round acts; from then
// on the decision core sees the job as holding those GPUs, as in the
// simulator, with the lease end its auction gave it, and the planner
// leases them to the job as soon as they are released. A later round may
// still take them back (the lease ended, or the job is preempted): the
// pending grant is then withdrawn.

// defers reports whether grants on held GPUs wait as pending grants: under
// a policy whose grants carry lease ends, without virtual clusters (whose
// cells a grant binds in its own round).
func (p *Planner) defers() bool {
	return p.stack().Caps.LeaseEnder != nil && p.stack().VCs == nil
}

// observePending is the core's view of a job with a pending grant: granted
// those GPUs, when the grant still stands. ok is false when it does not
// (it is withdrawn, and the job is classified as any other).
func (p *Planner) observePending(r *round, j *nomad.Job, pg lease.Pending) (core.Job, bool) {
	k := j.Key
	_, has := r.leases[k] // a revoking lease: pendingStale drops any other
	if why := p.pendingStale(r, j, pg); why != "" {
		r.withdraw(k, why)
		return core.Job{}, false
	}
	rec := p.record(r, j)
	g := pendingGrant(pg)
	st := lease.JobStatus{State: "queued", Preemptions: rec.Preemptions, GPUs: pg.GPUs, Node: r.nodeNames(g)}
	if victim, ok := p.heldBy(r, g); ok {
		st.Reason = r.waitingFor(victim, st.Node, g)
	}
	if has { // its own allocation still checkpointing
		st.Reason = ReasonMoving + "checkpointing before it resumes on " + st.Node
	}
	r.status[k] = st
	r.shown = append(r.shown, g)
	return withProgress(p.account(j, core.Granted, rec, nil, nil, lease.CheckpointRecord{}, r.now), r.progress, nil, nil, r.now), true
}

// pendingStale says why a pending grant no longer stands ("" when it does).
func (p *Planner) pendingStale(r *round, j *nomad.Job, pg lease.Pending) string {
	if !p.defers() {
		return "the policy no longer leases"
	}
	if j.Err != nil || r.finished(j) {
		return "job finished or rejected"
	}
	if l, ok := r.leases[j.Key]; ok && l.Revoke == nil {
		return "job holds a lease" // carried out (a planner stopped before deleting the record)
	}
	if l, ok := r.leases[j.Key]; ok && l.Revoke.Resubmitted {
		return "job resubmitted"
	}
	for _, id := range pg.GPUs {
		if _, ok := r.gpuNodeOf(id); !ok {
			return "GPU " + id + " is on no node Nomad reports"
		}
		for k, l := range r.leases {
			if k != j.Key && l.Revoke == nil && slices.Contains(l.GPUs, id) {
				return fmt.Sprintf("GPU %s is leased to %s", id, k)
			}
		}
	}
	return ""
}

// pend records a grant that waits for its GPUs (before any of them is
// released, so a planner that stops now finds it).
func (p *Planner) pend(r *round, g core.Grant, why string) {
	pg := lease.Pending{Namespace: g.Job.Namespace, JobID: g.Job.ID, Node: g.Node, GPUs: g.GPUs, DecidedAt: r.now.UTC()}
	if le := p.stack().Caps.LeaseEnder; le != nil {
		if e, ok := le.LeaseEnd(g.Job); ok {
			pg.Ends = e.UTC()
		}
	}
	r.add(step{Kind: stepPend, Job: g.Job, Pending: pg, Why: why})
	r.setPending(g.Job, pg)
	r.status[g.Job] = lease.JobStatus{State: "queued", Reason: why, GPUs: g.GPUs, Node: r.nodeNames(g), Preemptions: r.records[g.Job].Preemptions}
}

// withdraw deletes a pending grant that no longer stands.
func (r *round) withdraw(k core.JobKey, why string) {
	r.add(step{Kind: stepWithdraw, Job: k, Why: why})
	r.dropPending(k)
}

// carryOut leases to each job with a pending grant its GPUs once none is
// held any more and the job's own old lease is released. The pending
// record is deleted once the lease is written: a planner stopped in
// between finds the pending grant stale (the job holds a lease) and
// deletes it.
func (p *Planner) carryOut(r *round) {
	for _, k := range sortedKeys(r.pending) {
		pg := r.pending[k]
		g := pendingGrant(pg)
		if _, leased := r.leases[k]; leased {
			continue // its own allocation is still checkpointing
		}
		if _, held := p.heldBy(r, g); held || r.jobs[k] == nil {
			continue
		}
		if !p.grant(r, g) {
			continue
		}
		r.add(step{Kind: stepDropPending, Job: k})
		r.dropPending(k)
	}
}

func pendingGrant(pg lease.Pending) core.Grant {
	return core.Grant{Job: core.JobKey{Namespace: pg.Namespace, ID: pg.JobID}, Node: pg.Node, GPUs: pg.GPUs}
}

func sortedKeys[V any](m map[core.JobKey]V) []core.JobKey {
	ks := make([]core.JobKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, compareKeys)
	return ks
}
