package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// One record that cannot be used must not stop a round (docs/adversary.md):
// a listing decodes each value on its own, checks that it names the job
// its key names (a record under one job's key that claims another job
// would otherwise speak for that one), and returns what it could use with
// an *UnreadableError naming the rest.

// BadKey is a themis key whose value cannot be used: it does not decode,
// or it names another job than its key.
type BadKey struct {
	Key string
	// Job is the job the key names; zero when the key names none.
	Job core.JobKey
	Err error
}

func (b BadKey) String() string { return b.Key + ": " + b.Err.Error() }

// UnreadableError lists the keys of a listing whose values could not be
// used; the listing returns it with the values that could.
type UnreadableError struct{ Keys []BadKey }

func (e *UnreadableError) Error() string {
	msgs := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		msgs[i] = k.String()
	}
	return fmt.Sprintf("%d themis key(s) cannot be used: %s", len(e.Keys), strings.Join(msgs, "; "))
}

// Unreadable splits a listing's error: the bad keys of the
// *UnreadableError it is (nil if none), and err itself when it is another
// error (the listing failed as a whole).
func Unreadable(err error) ([]BadKey, error) {
	if e, ok := err.(*UnreadableError); ok {
		return e.Keys, nil
	}
	return nil, err
}

// list reads the values under prefix and hands each that decodes as a T,
// and (when owner is not nil) names the job its key names, to each with
// its ModifyIndex; the others come back in an *UnreadableError. A value
// is decoded once for as long as its key keeps it (decoded.go): what each
// gets shares its slices and pointers with later listings, and must not
// be written through.
func list[T any](ctx context.Context, s *Store, prefix string, owner func(T) core.JobKey, each func(v T, index uint64)) error {
	pairs, err := s.listPrefix(ctx, prefix)
	if err != nil {
		return err
	}
	if bad := decodeCached(&s.decodes, pairs, prefix, owner, each); len(bad) > 0 {
		return &UnreadableError{Keys: bad}
	}
	return nil
}

// listByJob is list into a new map by job, each value first passed
// through set (when not nil) with its ModifyIndex.
func listByJob[T any](ctx context.Context, s *Store, prefix string, owner func(T) core.JobKey, set func(v T, index uint64) T) (map[core.JobKey]T, error) {
	pairs, err := s.listPrefix(ctx, prefix)
	if err != nil {
		return map[core.JobKey]T{}, err
	}
	out, bad := byJob(&s.decodes, pairs, prefix, owner, set)
	if len(bad) > 0 {
		return out, &UnreadableError{Keys: bad}
	}
	return out, nil
}

// byJob is listByJob's decoding (through c, when not nil), without
// Consul: a map sized for the listing.
func byJob[T any](c *decodeCache, pairs api.KVPairs, prefix string, owner func(T) core.JobKey, set func(v T, index uint64) T) (map[core.JobKey]T, []BadKey) {
	out := make(map[core.JobKey]T, len(pairs))
	bad := decodeCached(c, pairs, prefix, owner, func(v T, index uint64) {
		if set != nil {
			v = set(v, index)
		}
		out[owner(v)] = v
	})
	return out, bad
}

// listPrefix lists prefix (cache.go), a refusal naming the ACL rule.
func (s *Store) listPrefix(ctx context.Context, prefix string) (api.KVPairs, error) {
	pairs, err := s.listPairs(ctx, prefix)
	if err != nil {
		return nil, aclErr(fmt.Errorf("list %s: %w", prefix, err), "list "+prefix, prefix, "read")
	}
	return pairs, nil
}

// KeyJob is the job of a key <prefix><namespace>/<job>, each part path
// escaped (lease.JobKey, lease.RecordKey, lease.StatusKey and the rest).
func KeyJob(prefix, key string) (core.JobKey, error) {
	rest, ok := strings.CutPrefix(key, prefix)
	ns, id, cut := strings.Cut(rest, "/")
	if !ok || !cut || ns == "" || id == "" {
		return core.JobKey{}, fmt.Errorf("key names no job: want %s<namespace>/<job>", prefix)
	}
	var err error
	if ns, err = url.PathUnescape(ns); err != nil {
		return core.JobKey{}, fmt.Errorf("key's namespace: %w", err)
	}
	if id, err = url.PathUnescape(id); err != nil {
		return core.JobKey{}, fmt.Errorf("key's job: %w", err)
	}
	return core.JobKey{Namespace: ns, ID: id}, nil
}

func leaseJob(l lease.JobLease) core.JobKey { return core.JobKey{Namespace: l.Namespace, ID: l.JobID} }

// GPULeases lists the GPU keys (lease.GPUKey) by GPU: the planner reads
// them when a job lease cannot be used, to hold the GPUs it leased. A key
// that cannot be used (it does not decode, or names another GPU) is named
// in an *UnreadableError, returned with the rest.
func (s *Store) GPULeases(ctx context.Context) (map[string]lease.GPULease, error) {
	pairs, _, err := s.api.KV().List(lease.GPUPrefix(), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, aclErr(fmt.Errorf("list %s: %w", lease.GPUPrefix(), err), "list "+lease.GPUPrefix(), lease.GPUPrefix(), "read")
	}
	out := map[string]lease.GPULease{}
	var bad []BadKey
	for _, p := range pairs {
		if p == nil {
			continue
		}
		var g lease.GPULease
		err := json.Unmarshal(p.Value, &g)
		if err == nil && lease.GPUKey(g.GPU) != p.Key {
			err = fmt.Errorf("its value names GPU %q", g.GPU)
		}
		if err != nil {
			bad = append(bad, BadKey{Key: p.Key, Err: err})
			continue
		}
		out[g.GPU] = g
	}
	if len(bad) > 0 {
		return out, &UnreadableError{Keys: bad}
	}
	return out, nil
}
