package core

import (
	"sync"
	"unsafe"
)

// grantIndex finds a running job's grant by the job's key: the index in
// the round's grants of the grant each job claimed. Decide matches grants
// to jobs by key through a map; a caller that says which job each grant
// belongs to (State.GrantJobs, the simulator) spares it hashing every key
// of every round, and the map is then built only if a scheduler asks
// (preemptions, room making, placers, allocators).
type grantIndex struct {
	m       map[JobKey]int // nil until built
	grants  []Grant
	claimed []bool
	scans   int // lookups answered by scanning, before the map is built
}

// maxScans is how many lookups scan the grants before get builds the map:
// a round usually preempts a job or two, and a scan costs a few string
// comparisons where the map costs a hash per grant.
const maxScans = 8

// get is the index of the grant held by the job with key k.
func (x *grantIndex) get(k JobKey) (int, bool) {
	if x.m == nil && x.scans < maxScans {
		// State.GrantJobs: no two grants share a key, so the claimed
		// grant with key k is the one the map would give.
		x.scans++
		for gi := range x.grants {
			if x.claimed[gi] && x.grants[gi].Job == k {
				return gi, true
			}
		}
		return 0, false
	}
	if x.m == nil {
		// State.GrantJobs: no two grants share a key, so the claimed
		// grants by key are what the map would hold once Decide deleted
		// the released ones.
		x.m = grantPool.Get().(map[JobKey]int)
		for gi, g := range x.grants {
			if x.claimed[gi] {
				x.m[g.Job] = gi
			}
		}
	}
	gi, ok := x.m[k]
	return gi, ok
}

// of is get's index alone (0 when k holds no grant, like a map's zero).
func (x *grantIndex) of(k JobKey) int {
	gi, _ := x.get(k)
	return gi
}

// free returns the map to its pool.
func (x *grantIndex) free() {
	if x.m != nil {
		clear(x.m)
		grantPool.Put(x.m)
		x.m = nil
	}
}

// grantPool recycles the per-round index of grants by job.
var grantPool = sync.Pool{New: func() any { return map[JobKey]int{} }}

// jobGrants is State.GrantJobs inverted: for each job of s.Jobs, 1 + the
// index of its grant (0: none), in buf. ok is false when GrantJobs is
// absent or does not match the jobs (an index out of range, a job with
// two grants; collectDirect checks the keys): Decide then matches by key.
func jobGrants(s State, buf []int32) (jg []int32, ok bool) {
	if s.GrantJobs == nil || len(s.GrantJobs) != len(s.Grants) {
		return buf, false
	}
	jg = zeroed(buf, len(s.Jobs))
	for gi := range s.Grants {
		ji := s.GrantJobs[gi]
		if ji < 0 || ji >= len(s.Jobs) || jg[ji] != 0 {
			return jg, false
		}
		jg[ji] = int32(gi + 1) // its key is checked as the jobs are collected
	}
	return jg, true
}

// jobGrantPool recycles jobGrants' buffer.
var jobGrantPool = sync.Pool{New: func() any { return new([]int32) }}

// runCount counts the running (Granted) jobs of a round, and the GPUs of
// those still restoring.
type runCount struct{ granted, restoring int }

func (r *runCount) add(j *Job) {
	if j.Phase == Granted {
		r.granted++
		if j.RestoreLeft > 0 {
			r.restoring += j.GPUs
		}
	}
}

// recopy is a copy of j in another phase.
func recopy(j *Job, phase Phase) *Job {
	c := *j
	c.Phase = phase
	return &c
}

// byKey indexes the grants by their jobs' keys.
func (x *grantIndex) byKey() {
	x.m = grantPool.Get().(map[JobKey]int)
	for gi, g := range x.grants {
		x.m[g.Job] = gi
	}
}

// claimKey claims the grant of the job with key k, if it holds one.
func (x *grantIndex) claimKey(k JobKey) bool {
	gi, ok := x.m[k]
	if ok {
		x.claimed[gi] = true
	}
	return ok
}

// collect appends to active the jobs of s that are not finished, their
// phases corrected: a granted job without a grant is queued, and a queued
// job that holds a grant (the adapters' repair case) is granted. It claims
// the grants it matches by key (byKey first).
func (x *grantIndex) collect(s State, active []*Job) ([]*Job, runCount) {
	nclaimed := 0
	for i := range s.Jobs {
		j := &s.Jobs[i]
		switch j.Phase {
		case Finished:
			continue
		case Granted:
			if !x.claimKey(j.Key) {
				j = recopy(j, Queued)
			}
		case Queued:
		default:
			j = recopy(j, Queued)
		}
		active = append(active, j)
	}
	for _, c := range x.claimed {
		if c {
			nclaimed++
		}
	}
	// Jobs that say they run were looked up; only when some grant is left
	// unclaimed can a queued job hold one, and only then are queued jobs
	// looked up too. Simulations keep thousands of queued jobs, so this
	// saves most of the hashing.
	if nclaimed < len(x.grants) {
		for k, j := range active {
			if j.Phase == Queued && x.claimKey(j.Key) {
				active[k] = recopy(j, Granted)
			}
		}
	}
	var run runCount
	for _, j := range active {
		run.add(j)
	}
	return active, run
}

// collectDirect is collect through State.GrantJobs inverted (jg), in one
// pass: no two jobs share a key, so a queued job's grant is never a
// granted job's too. ok is false, and active to be discarded, when a
// grant's key is not its job's.
func (x *grantIndex) collectDirect(s State, jg []int32, active []*Job) (_ []*Job, run runCount, ok bool) {
	for i := range s.Jobs {
		j := &s.Jobs[i]
		gi := int(jg[i]) - 1
		if gi >= 0 {
			if !sameKey(j.Key, x.grants[gi].Job) {
				return active, run, false
			}
		}
		switch j.Phase {
		case Finished:
			continue
		case Granted:
			if gi < 0 {
				j = recopy(j, Queued)
			}
		case Queued:
		default:
			j = recopy(j, Queued)
		}
		if gi >= 0 {
			x.claimed[gi] = true
			if j.Phase == Queued {
				j = recopy(j, Granted)
			}
		}
		run.add(j)
		active = append(active, j)
	}
	return active, run, true
}

// sameKey is a == b, answered without comparing bytes when the strings
// share their data (the usual case: a grant's key is its job's own).
func sameKey(a, b JobKey) bool {
	if len(a.ID) == len(b.ID) && len(a.Namespace) == len(b.Namespace) &&
		unsafe.StringData(a.ID) == unsafe.StringData(b.ID) && unsafe.StringData(a.Namespace) == unsafe.StringData(b.Namespace) {
		return true
	}
	return a == b
}
