package planner

import (
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// Held jobs (docs/design.md, "Held jobs"). Every themis job that waits
// for GPUs is held in Nomad with nothing to place: a job the round leaves
// queued (submitted into the pending pool or elsewhere) is re-registered
// with every group at count 0 in the pending pool (nomad.Client.Hold),
// after its record names the version that registers, the hold's ID and
// the counts (lease.Hold); a suspended job is held by its suspension, and
// the release that ends its lease records that hold. Each held version
// carries the version tag themis-held, which keeps it from Nomad's
// garbage collection; a hold whose version is no longer the job's (the
// job was pinned, resubmitted, finished) loses its tag and its record of
// the hold. The pin gives the groups their counts back from the record,
// never from the job's meta or tag (own.go).

// StatePurged is the status of a held job that Nomad no longer has.
const StatePurged = "purged"

// maxHoldWrites bounds a round's holds, tags and untags (each a Nomad
// write, one after another): 10,000 jobs submitted at once are held over rounds of
// this many, each well within the round's timeout, instead of one round
// of 20,000 writes that would time out halfway. A job not held yet waits
// as before (pending, its evaluation blocked), and each round's writes
// make the next round run.
const maxHoldWrites = 500

// holdWaiting runs after the round's actions: it holds each waiting job
// that is not held yet, tags each held version whose tag is missing or
// says something else, undoes the holds whose version is no longer the
// job's, and says which held jobs were purged from Nomad.
func (p *Planner) holdWaiting(r *round) {
	registers := map[core.JobKey]bool{}
	for _, s := range r.plan.steps {
		if nomadWrites[s.Kind] {
			registers[s.Job] = true
		}
	}
	writes := 0
	for _, j := range r.list {
		k := j.Key
		if r.aside[k] != "" || registers[k] {
			continue // a registration this round: the next round sees it
		}
		if writes >= maxHoldWrites {
			break // the next round holds and tags the rest
		}
		before := len(r.plan.steps)
		own := r.own(j)
		rec, hasRec := r.records[k]
		_, leased := r.leases[k]
		switch {
		case own.held && leased:
			// Granted this round: the pin is next, not a tag.
		case own.held:
			p.tagHeld(r, j, *rec.Held)
		case leased || r.finished(j):
			// Granted (a hold undone once the pin registered: the
			// next round), revoking, or done: a finished job's
			// record goes with its tag (dropRecord).
			if hasRec && rec.Held != nil && !r.finished(j) && !own.granted {
				r.unhold(k, rec)
			}
		case own.suspended != "":
			// Suspended by a planner that did not hold: that
			// suspension is the hold, recorded now.
			p.recordHold(r, j, rec, lease.Hold{ID: own.suspended, Version: j.Version(), Reason: "preempted", Since: r.now.UTC()})
		case j.Err == nil:
			p.hold(r, j)
		case hasRec && rec.Held != nil:
			r.unhold(k, rec) // rejected at a version of its user's
		}
		for _, s := range r.plan.steps[before:] {
			if s.Kind == stepHold || s.Kind == stepTag || s.Kind == stepUntag {
				writes++
			}
		}
	}
	for k, rec := range r.records { // statuses only: no order needed
		if rec.Held != nil && r.jobs[k] == nil && r.aside[k] == "" {
			r.status[k] = lease.JobStatus{State: StatePurged, Preemptions: rec.Preemptions,
				Reason: fmt.Sprintf("purged from Nomad while held (%s since %s); the planner keeps its record: submit the job again to queue it", rec.Held.Reason, rec.Held.Since.Format("2006-01-02 15:04:05 MST"))}
		}
	}
}

// nomadWrites are the steps that register a new version of their job.
var nomadWrites = map[stepKind]bool{stepSuspend: true, stepPin: true, stepGrant: true, stepAdopt: true, stepHold: true}

// hold plans the hold of a waiting job: its record names the hold, then
// the job is registered with nothing to place.
func (p *Planner) hold(r *round, j *nomad.Job) {
	id, err := p.newLeaseID()
	if err != nil {
		r.fail(err)
		return
	}
	h := lease.Hold{ID: id, Version: j.NextVersion(), Counts: j.GroupCounts(), Reason: lease.HoldQueued, Since: r.now.UTC()}
	rec := p.record(r, j)
	rec.Held = &h
	c := rec
	if !r.plan.amendNewRecord(j.Key, &c) {
		r.add(step{Kind: stepPutRecord, Job: j.Key, Record: &c})
	}
	r.setRecord(j.Key, rec)
	desc := heldDescription(j, h)
	r.add(step{Kind: stepHold, Job: j.Key, Nomad: j, Record: &c, Why: desc})
	st, ok := r.status[j.Key]
	if !ok {
		st = lease.JobStatus{State: "queued", Reason: "held by the planner until it is granted", Preemptions: rec.Preemptions}
	}
	if j.Pool() != r.world.pendingPool {
		st.Reason = "moved to node pool " + r.world.pendingPool + " from " + j.Pool() + " and held until it is granted"
	}
	st.Held = desc
	r.status[j.Key] = st
}

// recordHold records h, the hold j's current version already is (no
// registration): the next round tags it.
func (p *Planner) recordHold(r *round, j *nomad.Job, rec lease.JobRecord, h lease.Hold) {
	if rec.Namespace == "" {
		rec = p.record(r, j)
	}
	rec.Held = &h
	c := rec
	r.add(step{Kind: stepPutRecord, Job: j.Key, Record: &c, Why: "recorded a suspension as the job's hold"})
	r.setRecord(j.Key, rec)
}

// tagHeld tags a held version whose tag is missing or says something
// else, and shows the tag in the job's status. The description changes
// only when the hold does (heldDescription), so a held job costs Nomad
// one tag write per hold, not one per round.
func (p *Planner) tagHeld(r *round, j *nomad.Job, h lease.Hold) {
	desc := heldDescription(j, h)
	if got, ok := j.HeldTagDescription(); !ok || got != desc {
		r.add(step{Kind: stepTag, Job: j.Key, Nomad: j, Why: desc})
	}
	if st, ok := r.status[j.Key]; ok {
		st.Held = desc
		r.status[j.Key] = st
	}
}

// unhold removes the tag of a hold whose version is no longer the job's,
// then the hold from the job's record.
func (r *round) unhold(k core.JobKey, rec lease.JobRecord) {
	r.add(step{Kind: stepUntag, Job: k})
	rec.Held = nil
	c := rec
	r.add(step{Kind: stepPutRecord, Job: k, Record: &c})
	r.setRecord(k, rec)
}

// heldDescription is the description of a held version's tag: what the
// hold is, from the planner's record of it. It names neither the job's
// place in its queue nor anything else that moves while it waits: every
// grant would move the place of every job behind it, and rewriting the
// tags of 10,000 held jobs after each grant would be Nomad's busiest
// writes (`themis job explain` says where a job stands).
func heldDescription(j *nomad.Job, h lease.Hold) string {
	what := fmt.Sprintf("%d GPUs", j.Intent.GPUs)
	if j.Intent.GPUs == 1 {
		what = "1 GPU"
	}
	if j.Intent.VC != "" {
		what += " in VC " + j.Intent.VC
	}
	since := h.Since.UTC().Format("2006-01-02 15:04:05 UTC")
	if h.Reason == lease.HoldQueued {
		return fmt.Sprintf("queued: held by the themis planner since %s, waiting for %s; count 0 until it is granted (themis job explain %s)", since, what, j.Key)
	}
	return fmt.Sprintf("suspended: %s; held by the themis planner since %s, waiting for %s to resume from its checkpoint (themis job explain %s)", h.Reason, since, what, j.Key)
}

// heldCounts are the group counts a pin of j gives back: its hold's, when
// j is held (nil otherwise).
func (r *round) heldCounts(j *nomad.Job) map[string]int {
	if rec, ok := r.records[j.Key]; ok && rec.Held != nil && r.own(j).held {
		return rec.Held.Counts
	}
	return nil
}

// keepsHeld reports whether a record must be kept although its job is
// gone from Nomad: the job was held (purged by an operator, or by a
// garbage collection the tag did not stop), and is never reported
// finished.
func keepsHeld(rec lease.JobRecord) bool { return rec.Held != nil }

// amendNewRecord makes the round's write of k's new record (the first,
// planned when the round first saw the job) write rec instead, so that a
// job seen and held in one round costs one record write; false when there
// is no such write.
func (pl *plan) amendNewRecord(k core.JobKey, rec *lease.JobRecord) bool {
	for i := len(pl.steps) - 1; i >= 0; i-- {
		s := &pl.steps[i]
		if s.Job != k || s.Kind != stepPutRecord {
			continue
		}
		if s.Record == nil || s.Record.Index() != 0 {
			return false
		}
		s.Record = rec
		return true
	}
	return false
}
