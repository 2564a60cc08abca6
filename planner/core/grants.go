package core

import "sync"

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
// absent or does not match the jobs (an index out of range, a key that
// differs, a job with two grants): Decide then matches by key.
func jobGrants(s State, buf []int32) (jg []int32, ok bool) {
	if s.GrantJobs == nil || len(s.GrantJobs) != len(s.Grants) {
		return buf, false
	}
	jg = zeroed(buf, len(s.Jobs))
	for gi, g := range s.Grants {
		ji := s.GrantJobs[gi]
		if ji < 0 || ji >= len(s.Jobs) || jg[ji] != 0 || s.Jobs[ji].Key != g.Job {
			return jg, false
		}
		jg[ji] = int32(gi + 1)
	}
	return jg, true
}

// jobGrantPool recycles jobGrants' buffer.
var jobGrantPool = sync.Pool{New: func() any { return new([]int32) }}
