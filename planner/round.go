package planner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// round is one reconcile's view of Nomad and Consul.
type round struct {
	now  time.Time
	snap *nomad.Snapshot
	// jobs are the snapshot's jobs (list, in its order), whose Err the
	// round resets to ParseJob's and then sets from what it checks against
	// its records and config (the snapshot keeps parsed jobs across
	// rounds: nomad.Job.Reset).
	jobs    map[core.JobKey]*nomad.Job
	list    []*nomad.Job
	nodes   map[string]core.Node
	leases  map[core.JobKey]lease.JobLease
	records map[core.JobKey]consul.JobRecord
	// checkpoints are the jobs' newest complete checkpoints, as the task
	// driver published them.
	checkpoints map[core.JobKey]lease.CheckpointRecord
	// progress is how far each job has come, as its workload reported.
	progress map[core.JobKey]lease.ProgressRecord
	// held maps each GPU that a lease being torn down still holds (a job
	// checkpointing after a revoke, or a stopped job's allocation not yet
	// terminal) to that lease. The decision core sees these GPUs as free,
	// so it hands them to the job that caused the preemption instead of
	// preempting another one; the grant itself waits until they are
	// released.
	held   map[string]lease.JobLease
	status map[core.JobKey]consul.JobStatus
	errs   []error
	// cells, with virtual clusters, returns a granted job's virtual GPUs,
	// which its lease records for the replay.
	cells func(core.JobKey) []string
	// gpuNode maps each GPU to its node, built when a grant needs it.
	gpuNode map[string]string
	// learned says the policy was told of a finished job's size this
	// round (its recorded state may have changed after the decision).
	learned bool
	// vcs is the round's virtual clusters (nil without), for the View.
	vcs *hived.Cluster
	// pending is the grants that wait for their GPUs (pending.go); shown
	// the grants of those the core sees as holding them this round.
	pending map[core.JobKey]lease.Pending
	shown   []core.Grant
	// aside maps each job set aside this round to why, and asideGPUs are
	// the GPUs their leases hold (setaside.go).
	aside     map[core.JobKey]string
	asideGPUs map[string]bool
}

func (r *round) fail(err error) {
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

// Reconcile runs one round: observe, decide, act.
func (p *Planner) Reconcile(ctx context.Context) (err error) {
	var end roundEnd
	defer p.publish(time.Now(), &end, &err)
	if p.statuses == nil {
		if err := p.loadStatuses(ctx); err != nil {
			return err
		}
	}
	if err := p.importState(ctx); err != nil {
		return err
	}
	r, state, err := p.observe(ctx)
	if err != nil {
		return err
	}
	cp := p.stack().Scheduler()
	cp.ExplainWaits, cp.EqualParts = true, true
	placer, err := p.placer(r)
	if err != nil {
		return err
	}
	if placer != nil {
		cp.Placer = placer
	}
	d := cp.Decide(state, r.now)
	p.recheck = time.Time{}
	if rc := p.stack().Caps.Rechecker; rc != nil {
		p.recheck = rc.NextChange(r.now, afterDecision(state.Jobs, d))
	}
	if err := p.saveState(ctx); err != nil {
		return err // act on nothing the record does not know of
	}
	p.act(ctx, r, d)
	p.renewLeases(ctx, r)
	r.fail(p.recordAuction(ctx))
	if p.carriedOut() || r.learned {
		// The decision is carried out (Themis: a new leader has nothing
		// of it left to finish), or what the policy learned from the jobs
		// this round released (tiresias-gittins' job sizes).
		r.fail(p.saveState(ctx))
	}
	for k, st := range r.status {
		if j := r.jobs[k]; j != nil && j.Foreign() {
			st.Driver = j.Driver
			r.status[k] = st
		}
	}
	end = roundEnd{r: r, d: d}
	r.fail(p.writeStatuses(ctx, r.status, r.now))
	r.fail(p.forget(ctx, r))
	return errors.Join(r.errs...)
}

// observe reads Nomad and Consul, drives leases being torn down one step
// on, and builds the decision core's state.
func (p *Planner) observe(ctx context.Context) (*round, core.State, error) {
	st, err := p.readStore(ctx)
	if err != nil {
		return nil, core.State{}, err
	}
	snap, err := p.cfg.Nomad.Snapshot(ctx)
	if err != nil {
		return nil, core.State{}, err
	}
	r := &round{
		now: p.cfg.Now(), snap: snap, jobs: map[core.JobKey]*nomad.Job{}, nodes: map[string]core.Node{},
		leases: st.leases, records: st.records, checkpoints: st.checkpoints, progress: st.progress, pending: st.pending,
		held: map[string]lease.JobLease{}, status: map[core.JobKey]consul.JobStatus{}, aside: st.aside,
	}
	r.list = snap.Jobs
	for _, j := range snap.Jobs {
		j.Reset() // this round says what else is wrong with it
		r.jobs[j.Key] = j
	}
	for k, why := range snap.Unreadable {
		r.aside[k] = why
	}
	if err := p.setAside(ctx, r, st); err != nil {
		return nil, core.State{}, err
	}
	for _, n := range snap.Nodes {
		r.nodes[n.ID] = n
	}
	// Leases being taken back, and leases of jobs gone from Nomad.
	for k, l := range st.leases {
		if l.Revoke != nil && r.aside[k] == "" {
			p.advanceRevoke(ctx, r, r.jobs[k], l)
		}
	}
	for _, k := range sortedKeys(r.pending) {
		if r.jobs[k] == nil && r.aside[k] == "" {
			p.withdraw(ctx, r, k, "job gone from Nomad")
		}
	}
	state := core.State{Nodes: r.asideNodes(snap.Nodes)}
	for _, j := range r.list {
		if r.aside[j.Key] != "" {
			continue
		}
		if cj, ok := p.observeJob(ctx, r, j); ok {
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
	return r, state, nil
}

// observeJob classifies one job and returns it in the core's terms; ok is
// false for jobs the core must not see this round (rejected, being moved to
// the pending pool, or still stopping after a revoke). What the job's
// version is (pinned under its lease, suspended, the user's) comes from the
// planner's own records (own.go).
func (p *Planner) observeJob(ctx context.Context, r *round, j *nomad.Job) (core.Job, bool) {
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
			r.fail(p.revoke(ctx, r, j, l, lease.Revoke{Reason: "job resubmitted: the running version checkpoints and stops, the new one is queued", Resubmitted: true}))
			return core.Job{}, false
		}
		if err := p.release(ctx, r, l, nil, "job resubmitted"); err != nil {
			r.fail(err)
			return core.Job{}, false
		}
	}
	if own.legacy {
		p.adoptLegacy(ctx, r, j, r.leases[j.Key])
	}
	l, has := r.leases[j.Key]
	if j.Err == nil && !finished {
		j.Err = p.jobError(r, j, own, has)
	}
	if pg, ok := r.pending[j.Key]; ok {
		if cj, ok := p.observePending(ctx, r, j, pg); ok {
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
			r.status[j.Key] = consul.JobStatus{State: "rejected", Reason: j.Err.Error()}
			if !has {
				p.adopt(ctx, r, j)
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
			r.fail(p.revoke(ctx, r, j, l, lease.Revoke{Reason: why}))
			return core.Job{}, false
		}
		phase = core.Granted
	case has && own.granted:
		// Granted but never pinned: the planner stopped in between.
		phase = core.Granted
		r.fail(p.pin(ctx, r, j, l))
	case j.Pool() != p.cfg.Nomad.PendingPool():
		p.adopt(ctx, r, j)
		r.status[j.Key] = consul.JobStatus{State: "queued", Reason: "moved to node pool " + p.cfg.Nomad.PendingPool() + " to wait for a grant"}
		return core.Job{}, false
	}
	rec, err := p.record(ctx, r, j)
	if err != nil {
		r.fail(err)
		return core.Job{}, false
	}
	if phase == core.Granted {
		r.status[j.Key] = consul.JobStatus{State: "granted", Node: l.NodeNames(), GPUs: l.GPUs, LeaseID: l.LeaseID, Preemptions: rec.Preemptions}
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
	if !leased && own.suspended == "" {
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
	return nil
}

// adopt moves a themis job that is not in the pending pool (submitted
// elsewhere, or re-registered there by its user) into it, where Nomad
// cannot place it, to wait for a grant like every other themis job.
func (p *Planner) adopt(ctx context.Context, r *round, j *nomad.Job) {
	if j.Pool() == p.cfg.Nomad.PendingPool() {
		return
	}
	if err := p.cfg.Nomad.Adopt(ctx, j); err != nil && !errors.Is(err, nomad.ErrJobChanged) {
		r.fail(err)
		return
	}
	p.log.Info("moved a themis job into the pending pool to wait for a grant", "job", j.Key, "from_pool", j.Pool())
}

// act carries out the decision's actions in order: releases, promotions,
// preemptions, grants.
func (p *Planner) act(ctx context.Context, r *round, d core.Decision) {
	for _, a := range d.Actions {
		if k, ok := takesBack(a); ok {
			if _, ok := r.pending[k]; ok {
				// Its GPUs were never leased to it: nothing to take back.
				p.withdraw(ctx, r, k, "taken back before its GPUs were released")
				r.status[k] = consul.JobStatus{State: "queued", Reason: "its pending grant was taken back", Preemptions: r.records[k].Preemptions}
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
			p.learn(r, a.Grant.Job, l)
			r.learned = true
			r.fail(p.release(ctx, r, l, nil, endReason(r.status[a.Grant.Job])))
			r.fail(p.dropRecord(ctx, r, a.Grant.Job))
		case core.PromoteAction:
			r.fail(p.promote(ctx, r, a.Job))
		case core.PreemptAction:
			r.fail(p.preempt(ctx, r, a.Grant, d))
		case core.GrantAction:
			if _, ok := r.leases[a.Grant.Job]; ok && p.defers() {
				// Moved (preempted and granted elsewhere in one round):
				// it checkpoints first, then resumes there.
				p.pend(ctx, r, a.Grant, "moving: checkpointing before it resumes on "+r.nodeNames(a.Grant))
				continue
			}
			if _, ok := r.leases[a.Grant.Job]; ok {
				// Moved (preempted and granted elsewhere in one round):
				// it checkpoints first; the round after its release
				// grants it again.
				r.status[a.Grant.Job] = consul.JobStatus{State: "queued", Reason: "moving: checkpointing before it resumes elsewhere", Preemptions: r.records[a.Grant.Job].Preemptions}
				continue
			}
			if victim, ok := p.heldBy(r, a.Grant); ok && p.defers() {
				p.pend(ctx, r, a.Grant, r.waitingFor(victim, r.nodeNames(a.Grant), a.Grant))
				continue
			}
			if victim, ok := p.heldBy(r, a.Grant); ok {
				r.status[a.Grant.Job] = consul.JobStatus{State: "queued", Reason: r.waitingFor(victim, r.nodeNames(a.Grant), a.Grant)}
				continue
			}
			st, err := p.grant(ctx, r, a.Grant)
			if err != nil {
				r.fail(err)
				continue
			}
			r.status[a.Grant.Job] = st
		}
	}
	p.carryOut(ctx, r)
	asideNote := r.asideNote()
	for _, w := range d.Waits {
		st := consul.JobStatus{State: "queued", Reason: w.Reason + asideNote}
		if j := r.jobs[w.Job]; j != nil && r.own(j).suspended != "" {
			st.State = "suspended"
		}
		st.Preemptions = r.records[w.Job].Preemptions
		r.status[w.Job] = st
	}
}

// takesBack is the job whose grant a release or preemption ends.
func takesBack(a core.Action) (core.JobKey, bool) {
	switch a := a.(type) {
	case core.ReleaseAction:
		return a.Grant.Job, true
	case core.PreemptAction:
		return a.Grant.Job, true
	}
	return core.JobKey{}, false
}

// nodeNames names the nodes of a grant's GPUs, comma-separated.
func (r *round) nodeNames(g core.Grant) string {
	if parts, err := r.parts(g); err == nil {
		return lease.JobLease{Parts: parts}.NodeNames()
	}
	return r.nodes[g.Node].Name
}

// waitingFor explains a grant that waits for a stopping (or set-aside)
// job's GPUs.
func (r *round) waitingFor(victim lease.JobLease, node string, g core.Grant) string {
	why := fmt.Sprintf("granted %d GPUs on %s; waiting for %s/%s to stop", len(g.GPUs), node, victim.Namespace, victim.JobID)
	if r.aside[core.JobKey{Namespace: victim.Namespace, ID: victim.JobID}] != "" {
		why = fmt.Sprintf("granted %d GPUs on %s; waiting for %s/%s, set aside (unreadable), which holds them", len(g.GPUs), node, victim.Namespace, victim.JobID)
	}
	if victim.Revoke != nil {
		why += fmt.Sprintf(" (checkpointing, grace period until %s)", victim.Revoke.Deadline.Local().Format(time.TimeOnly))
	}
	return why
}

// afterDecision is the jobs as the decision leaves them: granted jobs run,
// preempted ones wait (what the policy's next change is computed from).
func afterDecision(jobs []core.Job, d core.Decision) []*core.Job {
	phase := map[core.JobKey]core.Phase{}
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.GrantAction:
			phase[a.Grant.Job] = core.Granted
		case core.PreemptAction:
			phase[a.Grant.Job] = core.Queued
		}
	}
	out := make([]*core.Job, len(jobs))
	for i := range jobs {
		j := jobs[i]
		if ph, ok := phase[j.Key]; ok {
			j.Phase = ph
		}
		out[i] = &j
	}
	return out
}

// leaseGrant is a lease in force as the decision core's grant.
func leaseGrant(l lease.JobLease) core.Grant {
	g := core.Grant{Job: core.JobKey{Namespace: l.Namespace, ID: l.JobID}, Node: l.NodeID, GPUs: l.GPUs}
	if len(l.Parts) > 0 {
		g.Node = "" // a multi-node gang, as the core's grants spell one
	}
	return g
}

func compareKeys(a, b core.JobKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
}
