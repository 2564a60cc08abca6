package planner

import (
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// The planner trusts only what it wrote (docs/adversary.md, part 3). A
// job's meta is its user's to write: `nomad job inspect` of a pinned job
// registered again keeps themis.lease, and anyone may write
// themis.suspended, themis.gang, themis.count or themis.restart_count. So
// whether a job runs under a lease, waits suspended, and how many
// instances its group has come from the planner's own records in Consul,
// checked against the job version the planner itself registered:
//
//	lease.Pinned           the version the pin of the lease registers
//	lease.Revoke.Suspends  the version the suspension of a revoking lease registers
//	record.Suspended       the version the suspension of the last lease registered
//	lease.SubmitIndex      the JobModifyIndex the lease was granted at (not pinned yet)
//
// Each is written before the registration it names (with the grant, with
// the revoke mark, or just before a suspension), so a planner that stops in
// between finds its records ahead of Nomad, never behind. The version a
// registration check-and-set on the index the planner read will get is
// known beforehand (lease.JobVersion), and no other registration can get
// it. A version that the records do not name is its user's: a job holding
// a lease is then a new submission, and the lease is taken back through
// the revoke path, as for any resubmission; one waiting must carry none of
// the planner's meta (nomad.CheckPlannerMeta). The meta must also agree
// with the record (lease or suspension named, count 0 for a suspension):
// a version only counts as the planner's when it is what the planner
// wrote.

// ownVersion is what the planner's records say of a job's current version.
type ownVersion struct {
	// pinned: the version the pin of the job's lease registered.
	pinned bool
	// granted: still the version the job's lease was granted on (its
	// SubmitIndex): the pin has not happened yet.
	granted bool
	// suspended is the lease whose suspension registered this version, ""
	// when none did.
	suspended string
	// legacy: the lease predates lease.Pinned and was taken as pinned by
	// its meta, once; the planner records the version now (adoptLegacy).
	legacy bool
	// held: the version the planner's hold registered (the record's
	// Held), with nothing to place: the job waits for a grant.
	held bool
}

// own classifies j's current version by the planner's records.
func (r *round) own(j *nomad.Job) ownVersion {
	var o ownVersion
	v := j.Version()
	l, has := r.leases[j.Key]
	if has {
		o.granted = j.ModifyIndex() == l.SubmitIndex
		switch {
		case l.Pinned != nil:
			o.pinned = *l.Pinned == v && j.MetaLease() == l.LeaseID
		case j.MetaLease() == l.LeaseID:
			// Written by a planner before this one recorded versions:
			// the meta is all there is, taken once (adoptLegacy).
			o.pinned, o.legacy = true, true
		}
		if rv := l.Revoke; rv != nil && j.MetaSuspended() == l.LeaseID && j.Count() == 0 &&
			(rv.Suspends != nil && *rv.Suspends == v || rv.Suspends == nil && l.Pinned == nil) {
			o.suspended = l.LeaseID
		}
	}
	if ms := j.MetaSuspended(); o.suspended == "" && ms != "" && j.Count() == 0 {
		if rec, ok := r.records[j.Key]; ok && rec.LastLease == ms && (rec.Suspended == nil || *rec.Suspended == v) {
			// A record without Suspended was written before planners
			// recorded the version; count 0 runs nothing, whoever
			// wrote it.
			o.suspended = ms
		}
	}
	if rec, ok := r.records[j.Key]; ok && rec.Held != nil {
		o.held = heldAt(j, *rec.Held)
	}
	return o
}

// heldAt reports whether j's current version is hold h's: the version it
// registered, its themis group at count 0, naming the hold in its meta (a hold
// of its own: themis.held; one that follows a suspension: themis.suspended).
func heldAt(j *nomad.Job, h lease.Hold) bool {
	if j.Version() != h.Version || j.Count() != 0 || h.ID == "" {
		return false
	}
	return j.Job.Meta[nomad.HeldMeta] == h.ID || j.MetaSuspended() == h.ID
}

// finished reports whether a job is done: stopped by its user, or dead in
// Nomad at a version other than one the planner's suspension registered.
func (r *round) finished(j *nomad.Job) bool { return finishedAs(j, r.own(j)) }

// finishedAs is finished for a job whose version o classifies.
func finishedAs(j *nomad.Job, o ownVersion) bool {
	return j.Stopped() || j.Dead() && o.suspended == "" && !o.held
}

// wantCount is the count the planner's records say j's themis group has at
// its current version.
func (r *round) wantCount(j *nomad.Job, o ownVersion) int {
	switch {
	case o.pinned:
		return len(r.leases[j.Key].Nodes())
	case o.suspended != "" || o.held:
		return 0
	}
	return 1
}

// adoptLegacy records the version of a job running under a lease written
// before planners recorded versions (taken as pinned by its meta this
// once), so that from now on only that version is.
func (r *round) adoptLegacy(j *nomad.Job, l lease.JobLease) {
	v := j.Version()
	l.Pinned = &v
	r.add(step{Kind: stepSetVersions, Job: j.Key, Lease: l, Why: "recorded the pinned version of a lease written by an earlier planner"})
	r.setLease(j.Key, l)
}
