package consul

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
)

// decodeCache keeps each listed value decoded, by key, with the bytes it
// was decoded from (#35, docs/scale.md): a listing decodes only the values
// that are new or changed since the last listing of their prefix, and a
// round over an unchanged KV store decodes nothing. A key that left the
// listing is dropped from the cache. A value that cannot be used is kept
// with why, so it is not decoded again either.
//
// A value is reused when its bytes are equal to those it was decoded from,
// not when its ModifyIndex is: decoding is a function of the key and the
// bytes alone, so this is exact whatever Consul's history (a Consul
// restarted empty, or restored from another cluster's snapshot, numbers
// its writes from a lower index again), and a key rewritten with the same
// value decodes nothing. The comparison costs little: the listing cache
// (cache.go) hands out the very slices the cache kept while the KV index
// stands, and a fresh listing is compared byte by byte, far cheaper than
// decoding. The ModifyIndex a listing passes on (a lease.JobRecord's index
// for check-and-set) is always the listed pair's own.
//
// The rule for callers: the values a listing returns (lease.JobLease,
// lease.JobRecord, lease.Pending, lease.ProgressRecord,
// lease.CheckpointRecord, lease.JobStatus) share their slices and pointers (a lease's GPUs, Cells,
// Parts, Pinned, Revoke, Revoke.Suspends and Counts; a record's Suspended
// and Held (with its Counts); a
// pending grant's and a status's GPUs; a progress record's Loss) with the
// cache and with every later listing, for as long as the key keeps its
// value. The maps and slices a listing returns are the caller's own, to
// change as it likes, and so are the values' plain fields. A caller may
// replace a shared field of its copy whole (l.Revoke = &rv after
// rv := *l.Revoke, rec.Suspended = v, l.Cells = nil) but must never write
// through one: no l.GPUs[i] = x, no sort of l.GPUs in place, no append to
// a shared slice, no l.Revoke.Deadline = t or *l.Pinned = v.
// docs/scale.md, "Decoding each value once", lists the places audited.
type decodeCache struct {
	mu  sync.Mutex
	off bool
	// m holds, for each listed prefix, a map[string]decoded[T] of the T
	// its values decode into.
	m map[string]any
	// decodes counts the values decoded, with or without the cache.
	decodes uint64
}

// decoded is one key's value as a listing decoded it: the value, or why it
// cannot be used.
type decoded[T any] struct {
	raw []byte
	v   T
	bad *BadKey
}

// SetDecodeCache turns the cache of decoded values off (or on again), for
// measuring the difference (e2e/nodesim TestScaleRounds and
// BenchmarkConsulRead). Off, listings decode every value and leave the
// cache as it was; on again, it reuses what it kept where the bytes are
// still the same, which is exact whatever changed meanwhile.
func (s *Store) SetDecodeCache(on bool) {
	s.decodes.mu.Lock()
	defer s.decodes.mu.Unlock()
	s.decodes.off = !on
}

// Decodes is how many listed values the store has decoded since it was
// made: each value once while the cache is on, every value of every
// listing while it is off.
func (s *Store) Decodes() uint64 {
	s.decodes.mu.Lock()
	defer s.decodes.mu.Unlock()
	return s.decodes.decodes
}

// decodeEach is list's decoding without a cache: every value is decoded.
func decodeEach[T any](pairs api.KVPairs, prefix string, owner func(T) core.JobKey, each func(v T, index uint64)) []BadKey {
	return decodeCached(nil, pairs, prefix, owner, each)
}

// decodeCached hands each value of pairs that decodes as a T, and (when
// owner is not nil) names the job its key names, to each with its
// ModifyIndex, and returns the others. With c (not nil, not off) it
// decodes only the values it has not decoded before under their key.
func decodeCached[T any](c *decodeCache, pairs api.KVPairs, prefix string, owner func(T) core.JobKey, each func(v T, index uint64)) []BadKey {
	var seen map[string]decoded[T]
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.off {
			seen, _ = c.m[prefix].(map[string]decoded[T])
			if seen == nil {
				seen = map[string]decoded[T]{}
				if c.m == nil {
					c.m = map[string]any{}
				}
				c.m[prefix] = seen
			}
		}
	}
	var bad []BadKey
	listed := 0
	for _, p := range pairs {
		if p == nil {
			continue
		}
		listed++
		d, ok := seen[p.Key]
		if !ok || !bytes.Equal(d.raw, p.Value) {
			d = decodeOne(p, prefix, owner)
			if c != nil {
				c.decodes++
			}
			if seen != nil {
				seen[p.Key] = d
			}
		}
		if d.bad != nil {
			bad = append(bad, *d.bad)
			continue
		}
		each(d.v, p.ModifyIndex)
	}
	if len(seen) > listed {
		drop(seen, pairs)
	}
	return bad
}

// drop removes from seen the keys pairs does not list.
func drop[T any](seen map[string]decoded[T], pairs api.KVPairs) {
	listed := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		if p != nil {
			listed[p.Key] = true
		}
	}
	for k := range seen {
		if !listed[k] {
			delete(seen, k)
		}
	}
}

// decodeOne decodes one listed value: a T that names the job its key
// names, or why it cannot be used.
func decodeOne[T any](p *api.KVPair, prefix string, owner func(T) core.JobKey) decoded[T] {
	d := decoded[T]{raw: p.Value}
	var k core.JobKey
	var kerr error
	if owner != nil {
		k, kerr = KeyJob(prefix, p.Key)
	}
	err := json.Unmarshal(p.Value, &d.v)
	switch {
	case kerr != nil:
		err = kerr
	case err != nil:
		err = fmt.Errorf("does not decode: %w", err)
	case owner != nil && owner(d.v) != k:
		err = fmt.Errorf("its value names job %s, its key %s", owner(d.v), k)
	}
	if err != nil {
		d.bad = &BadKey{Key: p.Key, Job: k, Err: err}
		var zero T
		d.v = zero
	}
	return d
}
