package plannertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// ChangeMark is a digest of the fake cluster's state (planner.ChangeMarker):
// whatever a test or the planner changed, in a field or through a method,
// changes it, as any write raises Nomad's table indexes.
func (f *Nomad) ChangeMark(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	unreadable := map[string]string{}
	for k, err := range f.Unreadable {
		if err != nil {
			unreadable[k.String()] = err.Error()
		}
	}
	allocs := map[string][]*Alloc{}
	for k, as := range f.Allocs {
		allocs[k.String()] = as
	}
	jobs := map[string]any{}
	for k, j := range f.Jobs {
		jobs[k.String()] = j
	}
	return digest(jobs, allocs, f.Nodes, unreadable, f.Cached)
}

// ChangeMark is a digest of the fake KV's state (planner.ChangeMarker).
func (s *Store) ChangeMark(context.Context) (string, error) {
	bad := make([]string, len(s.Bad))
	for i, b := range s.Bad {
		bad[i] = fmt.Sprint(b.Key, b.Err)
	}
	names := slices.Sorted(maps.Keys(s.PolicyStates))
	states := make([]string, len(names))
	for i, n := range names {
		states[i] = n + "=" + string(s.PolicyStates[n])
	}
	return digest(keyed(s.JobLeases), s.GPUOwners, keyed(s.JobRecords), keyed(s.RecordIndex), keyed(s.JobStatuses),
		keyed(s.CheckpointRecords), keyed(s.ProgressRecords), keyed(s.PendingGrants), states, s.Auction, bad)
}

// keyed is m with its job keys spelled as strings (JSON's map keys).
func keyed[V any, K interface {
	comparable
	fmt.Stringer
}](m map[K]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k.String()] = v
	}
	return out
}

// digest hashes the JSON of parts (encoding/json sorts map keys).
func digest(parts ...any) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, p := range parts {
		if err := enc.Encode(p); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
