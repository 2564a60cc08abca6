package planner

import (
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// Service accounting. What the preemptive policies rank by (attained
// service, time executed and waited since the last promotion, preemptions,
// first submit and start) comes from Nomad's allocation times: the task's
// StartedAt to FinishedAt (or now) under each lease, times the lease's GPUs.
// Leases that ended are summed into the job's record in Consul by the
// transaction that releases them, so neither a planner restart nor Nomad's
// garbage collection of old allocations resets a job's service.

// record returns the job's record, creating it the first time the planner
// sees the job.
func (p *Planner) record(r *round, j *nomad.Job) lease.JobRecord {
	if rec, ok := r.records[j.Key]; ok {
		return rec
	}
	rec := lease.JobRecord{Namespace: j.Key.Namespace, JobID: j.Key.ID, FirstSubmit: j.CoreJob(core.Queued).Submitted.UTC()}
	r.add(step{Kind: stepPutRecord, Job: j.Key, Record: &rec})
	r.setRecord(j.Key, rec)
	return rec
}

// served adds the service a lease gave (its allocations' run time) to rec.
func served(rec lease.JobRecord, l lease.JobLease, allocs []nomad.Alloc, now time.Time) lease.JobRecord {
	run, first := leaseRun(l, allocs, now)
	rec.Executed += run.Seconds()
	rec.Attained += run.Seconds() * float64(len(l.GPUs))
	if rec.FirstStart.IsZero() && !first.IsZero() {
		rec.FirstStart = first.UTC()
	}
	rec.LastLease = l.LeaseID
	return rec
}

// leaseRun is how long the job's task ran under lease l (its allocations
// created since the grant) and when it first started under it.
func leaseRun(l lease.JobLease, allocs []nomad.Alloc, now time.Time) (run time.Duration, first time.Time) {
	for _, a := range allocs {
		if a.Created.Before(l.GrantedAt) {
			continue
		}
		run += a.RanFor(now)
		if !a.Started.IsZero() && (first.IsZero() || a.Started.Before(first)) {
			first = a.Started
		}
	}
	return run, first
}

// account turns a job, its record and (when granted) its current lease and
// newest checkpoint into the decision core's job, with its service counters
// and the work it would lose if preempted now.
func (p *Planner) account(j *nomad.Job, phase core.Phase, rec lease.JobRecord, l *lease.JobLease, allocs []nomad.Alloc, ckpt lease.CheckpointRecord, now time.Time) core.Job {
	cj := j.CoreJob(phase)
	cj.UntrustedProgress = !p.trusts(j)
	cj.Submitted = rec.FirstSubmit
	cj.Preemptions = rec.Preemptions
	cj.Remaining = -1 // live jobs do not say how long they run
	executed, attained, firstStart := rec.Executed, rec.Attained, rec.FirstStart
	if l != nil {
		run, first := leaseRun(*l, allocs, now)
		executed += run.Seconds()
		attained += run.Seconds() * float64(len(l.GPUs))
		if firstStart.IsZero() {
			firstStart = first
		}
		if rec.Preemptions > 0 && p.cfg.RestoreGuard > 0 {
			// A resumed job is not preempted again before it made
			// progress (or before it started at all).
			cj.RestoreLeft = max(0, (p.cfg.RestoreGuard - run).Seconds())
		}
		cj.CheckpointAge = checkpointAge(run, first, ckpt, now)
		if n := len(l.Parts); n > 1 {
			cj.RunRate = float64(n) // leaseRun sums the parts' run times
		}
	}
	cj.Started, cj.FirstStart = !firstStart.IsZero(), firstStart
	cj.Attained = attained
	cj.Executed = max(0, executed-rec.ExecutedAtPromotion)
	since := rec.FirstSubmit
	if rec.PromotedAt.After(since) {
		since = rec.PromotedAt
	}
	cj.Waited = max(0, now.Sub(since).Seconds()-cj.Executed)
	return cj
}

// checkpointAge is how many seconds of the running job's work would be lost
// if it were preempted now (core.Job.CheckpointAge): the time since its
// newest complete checkpoint when it completed one during this run, else
// the whole of this run (it resumed from an older checkpoint, from
// scratch, or from one it never published). Never more than this run: a
// job that never publishes a complete checkpoint is not the core's "no
// checkpoint" (-1, all its execution lost), or it could resume from a
// private file and look ever more expensive to preempt under
// least-lost-work (docs/adversary.md).
// run and start are the job's run time and first start under its current
// lease (leaseRun).
func checkpointAge(run time.Duration, start time.Time, c lease.CheckpointRecord, now time.Time) float64 {
	if start.IsZero() {
		return 0 // not started yet: nothing done to lose
	}
	switch {
	case c.Time.IsZero():
		return run.Seconds()
	case !c.Time.Before(start):
		return max(0, now.Sub(c.Time).Seconds())
	default:
		return run.Seconds()
	}
}

// promote records a Tiresias starvation promotion: the job's executed and
// waited counters restart from now.
func (p *Planner) promote(r *round, k core.JobKey) {
	rec, ok := r.records[k]
	if !ok {
		return
	}
	executed := rec.Executed
	if l, ok := r.leases[k]; ok {
		run, _ := leaseRun(l, r.snap.Allocs[k], r.now)
		executed += run.Seconds()
	}
	rec.PromotedAt, rec.ExecutedAtPromotion = r.now.UTC(), executed
	r.add(step{Kind: stepPromote, Job: k, Record: &rec})
	r.setRecord(k, rec)
}

// learn tells a policy that learns job sizes (Tiresias-Gittins without a
// distribution file) the GPU-seconds a finished job received. What it
// learned lives in the planner's memory only: give tiresias.gittins_dist
// for a ranking that survives a planner restart.
func (r *round) learn(k core.JobKey, l lease.JobLease) {
	rec, known := r.records[k]
	if !known {
		return
	}
	run, _ := leaseRun(l, r.snap.Allocs[k], r.now)
	r.add(step{Kind: stepLearn, Job: k, Lease: l, Learn: rec.Attained + run.Seconds()*float64(len(l.GPUs))})
}

// dropRecord deletes a finished job's record, after the tag of a hold it
// records (hold.go), so that Nomad collects the job as any other.
func (r *round) dropRecord(k core.JobKey) {
	rec, ok := r.records[k]
	if !ok {
		return
	}
	if rec.Held != nil && r.jobs[k] != nil {
		r.add(step{Kind: stepUntag, Job: k})
	}
	r.add(step{Kind: stepDropRecord, Job: k})
	r.dropRecordOf(k)
}

// forget deletes the records of jobs that finished or left Nomad and hold no
// lease (a planner stopped between a release and the record's deletion).
func (r *round) forget() {
	var gone []core.JobKey
	for k := range r.records {
		if _, leased := r.leases[k]; leased || r.aside[k] != "" {
			continue
		}
		if j := r.jobs[k]; j != nil && !r.finished(j) {
			continue
		}
		if r.jobs[k] == nil && keepsHeld(r.records[k]) {
			continue // purged while held: kept, never finished (hold.go)
		}
		gone = append(gone, k)
	}
	slices.SortFunc(gone, compareKeys)
	for _, k := range gone {
		r.dropRecord(k)
	}
}

// progressSkew is how far ahead of the planner's clock a progress record's
// time may be (the clocks of a client and the planner's host differ).
const progressSkew = time.Minute

// withProgress gives a job what its progress reports tell: with a known
// total and a measured rate, its remaining time (Remaining) and whole work
// (Work), which perfect-knowledge policies and Themis's agents use; a job
// that reports nothing keeps Remaining unknown (-1). The driver reads the
// report every few seconds, so a record from the allocation that still
// runs is as old as that: the time since it was read is taken off, as the
// job has kept running since (allocs are the job's allocations when it
// holds a lease, nil otherwise). The driver measures the rate where the
// job runs, and the core counts time at full speed (on one node): a rate
// measured by an allocation that still runs is divided by its placement's
// slowdown (placement.go); a record from an earlier allocation is taken
// as it is (where that one ran is not known any more).
func withProgress(cj core.Job, progress map[core.JobKey]lease.ProgressRecord, allocs []nomad.Alloc, nodes map[string]core.Node, now time.Time) core.Job {
	pr, ok := progress[cj.Key]
	if !ok || pr.At.After(now.Add(progressSkew)) {
		// None, or one from the future: the driver stamps a record with
		// its clock when it reads the report, so a record far ahead of
		// the planner's would never age (docs/themis.md, "Whose progress
		// counts"); it is not used.
		return cj
	}
	if left := pr.Remaining(); left >= 0 {
		slow := 1.0
		for _, a := range allocs {
			if a.ID == pr.AllocID && a.ClientStatus == "running" {
				slow = placementSlowdown(cj, allocs, nodes)
				if now.After(pr.At) {
					left = max(0, left-now.Sub(pr.At).Seconds())
				}
			}
		}
		cj.Remaining = left / slow
		cj.Work = float64(pr.Total) / pr.Rate / slow
	}
	return cj
}
