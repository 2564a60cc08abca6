package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// Taking GPUs back (preemption) is a sequence of idempotent steps, each
// re-derived every round from Consul and Nomad, so that a planner killed at
// any point is finished by the next one:
//
//  1. revoke:  the job's lease gets a Revoke record (reason, deadline =
//     now + grace period), check-and-set, written once.
//  2. suspend: the job is re-registered with group count 0 and
//     themis.suspended = <lease> (check-and-set on its JobModifyIndex);
//     Nomad stops its allocation through the driver's StopTask, which
//     signals the workload, waits the grace period (the task's
//     kill_timeout) and kills it.
//  3. release: once Nomad reports every allocation of the job terminal
//     (a lost one only once its node reported it stopped, or past the
//     lost bound: lost.go), one Consul transaction deletes the lease's
//     keys and adds the lease's service and one preemption to the job's
//     record.
//
// Until step 3 the lease's GPUs are held: grants on them wait.

// preempt starts taking a lease back (steps 1 and 2).
func (p *Planner) preempt(r *round, g core.Grant, d core.Decision) {
	l, ok := r.leases[g.Job]
	if !ok {
		r.fail(fmt.Errorf("preempt %s: no lease in Consul", g.Job))
		return
	}
	// A guaranteed job is preempted by its own VC's policy (only that
	// ranks and makes room among its VC's guaranteed jobs).
	pol := p.stack().Policy
	if j := r.jobs[g.Job]; j != nil && j.Err == nil && j.Intent.Priority >= 0 {
		pol = p.stack().Caps.Of(l.VC).Policy
	}
	rv := lease.Revoke{Reason: fmt.Sprintf("preempted by %s%s", pol.Name(), beneficiaries(g, d))}
	p.revoke(r, r.jobs[g.Job], l, rv)
}

// revoke marks lease l of job j (nil when purged) as taken back, with the
// job's grace period as deadline, and drives it on.
func (p *Planner) revoke(r *round, j *nomad.Job, l lease.JobLease, rv lease.Revoke) {
	grace := p.graceOf(j, l)
	if j != nil {
		if !j.Stopped() {
			next := j.NextVersion() // what the suspension registers (own.go)
			rv.Suspends = &next
		}
	}
	rv.Since, rv.Deadline = r.now.UTC(), r.now.Add(grace).UTC()
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	r.add(step{Kind: stepRevoke, Job: k, Nomad: j, Lease: l, Revoke: rv})
	marked := l
	marked.Revoke = &rv
	r.setLease(k, marked)
	p.markHeld(r, marked)
	p.advanceRevoke(r, j, marked)
}

// beneficiaries names the jobs this round grants the preempted GPUs to.
func beneficiaries(g core.Grant, d core.Decision) string {
	var who []string
	for _, a := range d.Actions {
		if ga, ok := a.(core.GrantAction); ok && slices.ContainsFunc(ga.Grant.GPUs, func(id string) bool { return slices.Contains(g.GPUs, id) }) {
			who = append(who, ga.Grant.Job.String())
		}
	}
	if len(who) == 0 {
		return ""
	}
	return " for " + strings.Join(who, ", ")
}

// advanceRevoke drives a revoking lease one step on (steps 2 and 3). j is
// nil when the job was purged from Nomad.
func (p *Planner) advanceRevoke(r *round, j *nomad.Job, l lease.JobLease) {
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	if j != nil && !j.Stopped() && r.own(j).suspended != l.LeaseID && j.Count() > 0 {
		// Not the planner's suspension (a version of count 0 runs
		// nothing, whoever wrote it): record the version this one
		// registers, then suspend. A job the user changed meanwhile is
		// suspended by the next round, which reads the new version.
		l = r.suspends(j, l)
		r.add(step{Kind: stepSuspend, Job: k, Nomad: j, Lease: l})
	}
	if p.stillRunning(r, k, l) {
		p.markHeld(r, l)
		st := revokingStatus(r, l)
		if a, until, ok := p.lostHolding(r, k, l); ok {
			st.Reason = r.lostReason(st.Reason, a, until)
			if r.lost == nil {
				r.lost = map[core.JobKey]time.Time{}
			}
			r.lost[k] = until
		}
		r.status[k] = st
		return
	}
	// Step 3: every allocation is terminal.
	if j == nil || r.finished(j) {
		r.release(l, nil, "job stopped while being revoked")
		r.dropRecord(k)
		return
	}
	rec := p.record(r, j)
	if rec.LastLease != l.LeaseID {
		rec = served(rec, l, r.snap.Allocs[k], r.now)
		if !l.Revoke.Resubmitted {
			rec.Preemptions++
		}
	}
	rec.Suspended = l.Revoke.Suspends
	if v := l.Revoke.Suspends; v != nil {
		// Its suspension is its hold from now on (hold.go).
		rec.Held = &lease.Hold{ID: l.LeaseID, Version: *v, Reason: l.Revoke.Reason, Since: r.now.UTC()}
	}
	r.release(l, &rec, "revoked: the job's allocation stopped")
}

// suspends records on a revoking lease the job version its suspension of
// j registers (own.go), unless it already names it, and returns the lease.
func (r *round) suspends(j *nomad.Job, l lease.JobLease) lease.JobLease {
	next := j.NextVersion()
	if l.Revoke.Suspends != nil && *l.Revoke.Suspends == next {
		return l
	}
	rv := *l.Revoke
	rv.Suspends = &next
	l.Revoke = &rv
	r.add(step{Kind: stepSetVersions, Job: j.Key, Lease: l})
	r.setLease(j.Key, l)
	return l
}

// revokingStatus is the status of a job whose lease l is being taken back.
func revokingStatus(r *round, l lease.JobLease) lease.JobStatus {
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	return lease.JobStatus{State: "revoking", Reason: l.Revoke.Reason, Node: l.NodeNames(), GPUs: l.GPUs,
		LeaseID: l.LeaseID, Deadline: l.Revoke.Deadline, Preemptions: r.records[k].Preemptions}
}

// stillRunning reports whether a lease's job has an allocation that is not
// terminal on the lease's node, or one lost with its node whose task may
// still run there (lost.go): the GPUs may still be in use.
func (p *Planner) stillRunning(r *round, k core.JobKey, l lease.JobLease) bool {
	for _, a := range r.snap.Allocs[k] {
		if !a.Terminal() && (a.NodeID == "" || l.OnNode(a.NodeID)) {
			return true
		}
	}
	_, _, lost := p.lostHolding(r, k, l)
	return lost
}

// markHeld marks a lease's GPUs as not yet free (r.held).
func (p *Planner) markHeld(r *round, l lease.JobLease) {
	for _, id := range l.GPUs {
		r.held[id] = l
	}
}

// heldBy returns the lease still holding one of a grant's GPUs.
func (p *Planner) heldBy(r *round, g core.Grant) (lease.JobLease, bool) {
	for _, id := range g.GPUs {
		if l, ok := r.held[id]; ok {
			return l, true
		}
	}
	return lease.JobLease{}, false
}

// release deletes a lease's keys, with rec written in the same transaction
// when not nil (the job's record from then on), and forgets the lease for
// the rest of the round.
func (r *round) release(l lease.JobLease, rec *lease.JobRecord, why string) {
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	s := step{Kind: stepRelease, Job: k, Lease: l, Why: why}
	if rec != nil {
		c := *rec
		s.Record = &c
		r.setRecord(k, c)
	}
	r.add(s)
	r.dropLease(k)
}
