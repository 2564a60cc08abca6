package planner

import (
	"fmt"
	"slices"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// observe plans what the world as read calls for before any decision
// (leases being taken back driven on, pending grants of jobs gone
// withdrawn, each job classified: observeJob) and builds the decision
// core's state from the model that leaves.
func (p *Planner) observe(r *round) core.State {
	r.setAside()
	// Leases being taken back, and leases of jobs gone from Nomad.
	var revoking []core.JobKey
	for k, l := range r.leases {
		if l.Revoke != nil && r.aside[k] == "" {
			revoking = append(revoking, k)
		}
	}
	slices.SortFunc(revoking, compareKeys)
	for _, k := range revoking {
		p.advanceRevoke(r, r.jobs[k], r.leases[k])
	}
	for _, k := range sortedKeys(r.pending) {
		if r.jobs[k] == nil && r.aside[k] == "" {
			r.withdraw(k, "job gone from Nomad")
		}
	}
	state := core.State{Nodes: r.asideNodes(r.snap.Nodes)}
	for _, j := range r.list {
		if r.aside[j.Key] != "" {
			continue
		}
		if cj, ok := p.observeJob(r, j); ok {
			state.Jobs = append(state.Jobs, cj)
		}
	}
	for k, l := range r.leases {
		if l.Revoke != nil || r.aside[k] != "" {
			continue // held: not the core's to release or keep
		}
		state.Grants = append(state.Grants, leaseGrant(l))
	}
	state.Grants = append(state.Grants, r.shown...)
	slices.SortFunc(state.Grants, func(a, b core.Grant) int { return compareKeys(a.Job, b.Job) })
	return state
}

// observeJob classifies one job and returns it in the core's terms; ok is
// false for jobs the core must not see this round (rejected, being moved to
// the pending pool, or still stopping after a revoke). What the job's
// version is (pinned under its lease, suspended, the user's) comes from the
// planner's own records (own.go).
func (p *Planner) observeJob(r *round, j *nomad.Job) (core.Job, bool) {
	own := r.own(j)
	finished := finishedAs(j, own) // the version's: a release below changes neither
	if l, has := r.leases[j.Key]; has && l.Revoke == nil && !own.pinned && !own.granted && !finished {
		// A version the planner did not register: the user resubmitted
		// the job (or re-registered it with the planner's meta kept or
		// forged), whatever it says. Nomad keeps the old allocation
		// running (it backs out an update it cannot place), so the lease
		// is taken back like a preemption, without counting as one, and
		// the new version queues once the old one has stopped; a lease
		// whose allocation has ended is stale and released at once.
		if p.stillRunning(r, j.Key, l) {
			p.revoke(r, j, l, lease.Revoke{Reason: "job resubmitted: the running version checkpoints and stops, the new one is queued", Resubmitted: true})
			return core.Job{}, false
		}
		r.release(l, nil, "job resubmitted")
	}
	if own.legacy {
		r.adoptLegacy(j, r.leases[j.Key])
	}
	l, has := r.leases[j.Key]
	if j.Err == nil && !finished {
		j.Err = p.jobError(r, j, own, has)
	}
	if pg, ok := r.pending[j.Key]; ok {
		if cj, ok := p.observePending(r, j, pg); ok {
			return cj, true
		}
	}
	if has && l.Revoke != nil {
		return core.Job{}, false // still revoking: advanceRevoke set its status
	}
	if j.Err != nil {
		// Not in the core's jobs: a lease it still holds is released. A
		// rejected job outside the pending pool is moved there all the
		// same, where Nomad cannot place it.
		if !finished {
			r.status[j.Key] = lease.JobStatus{State: "rejected", Reason: j.Err.Error()}
			if !has {
				p.adopt(r, j)
			}
		}
		return core.Job{}, false
	}
	phase := core.Queued
	switch {
	case finished:
		r.status[j.Key] = p.endStatus(r, j)
		return j.CoreJob(core.Finished), true
	case has && own.pinned:
		if why := p.brokenRun(r, l); why != "" {
			p.revoke(r, j, l, lease.Revoke{Reason: why})
			return core.Job{}, false
		}
		phase = core.Granted
	case has && own.granted:
		// Granted but never pinned: the planner stopped in between.
		phase = core.Granted
		r.add(r.pin(j, l))
	case j.Pool() != r.world.pendingPool && !own.held:
		// Held this round (holdWaiting), which moves it into the
		// pending pool; the next round queues it.
		r.status[j.Key] = lease.JobStatus{State: "queued", Reason: "moved to node pool " + r.world.pendingPool + " to wait for a grant"}
		return core.Job{}, false
	}
	rec := p.record(r, j)
	if phase == core.Granted {
		r.status[j.Key] = lease.JobStatus{State: "granted", Node: l.NodeNames(), GPUs: l.GPUs, LeaseID: l.LeaseID, Preemptions: rec.Preemptions}
		return withProgress(p.account(j, phase, rec, &l, r.snap.Allocs[j.Key], r.checkpoints[j.Key], r.now), r.progress, r.snap.Allocs[j.Key], r.nodes, r.now), true
	}
	return withProgress(p.account(j, phase, rec, nil, nil, lease.CheckpointRecord{}, r.now), r.progress, nil, nil, r.now), true
}

// jobError is what the planner rejects a valid-looking job version for,
// from what it knows and the job cannot say of itself: the planner's meta
// in a version it did not register, a group count its records do not give
// this version, a grace period Nomad would cut, a virtual cluster, priority
// or class the job's namespace may not use. nil when none.
func (p *Planner) jobError(r *round, j *nomad.Job, own ownVersion, leased bool) error {
	if !leased && own.suspended == "" && !own.held {
		// It may be granted (pinned) now: the planner-only keys in its
		// meta must be the planner's (docs/adversary.md, parts 2 and 3).
		if err := nomad.CheckPlannerMeta(j); err != nil {
			return err
		}
	}
	if err := nomad.CheckCount(j, r.wantCount(j, own)); err != nil {
		return err
	}
	if p.cfg.MaxKillTimeout > 0 && j.Intent.GracePeriod > p.cfg.MaxKillTimeout {
		return fmt.Errorf("job %q group %q task %q: themis.grace_period: %s is longer than the Nomad clients' max_kill_timeout (%s), which would cut it short; ask for at most %s, or raise client.max_kill_timeout and the planner's -max-kill-timeout",
			j.Key.ID, j.Group, j.Task, j.Intent.GracePeriod, p.cfg.MaxKillTimeout, p.cfg.MaxKillTimeout)
	}
	if err := p.tenancyError(j); err != nil {
		return fmt.Errorf("job %q group %q task %q: %w", j.Key.ID, j.Group, j.Task, err)
	}
	if err := p.graceError(j, leased); err != nil {
		return fmt.Errorf("job %q group %q task %q: %w", j.Key.ID, j.Group, j.Task, err)
	}
	return nil
}

// adopt moves a themis job that is not in the pending pool (submitted
// elsewhere, or re-registered there by its user) into it, where Nomad
// cannot place it, to wait for a grant like every other themis job.
func (p *Planner) adopt(r *round, j *nomad.Job) {
	if j.Pool() == r.world.pendingPool {
		return
	}
	r.add(step{Kind: stepAdopt, Job: j.Key, Nomad: j})
}
