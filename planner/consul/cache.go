package consul

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// probeKey is the key, under a listed prefix, whose read asks Consul for
// its KV index: no themis record has it (a record's key is
// <prefix><namespace>/<job>), and a read of a key that does not exist
// answers with the index of the whole KV store (its X-Consul-Index: the
// highest index of any key or tombstone), which every write raises,
// deletions included.
const probeKey = ".kv-index"

// listCache keeps each listed prefix's pairs with the KV index read just
// before the listing (#35, docs/scale.md): while the index stays the same,
// nothing in KV changed since, and a round reuses the pairs instead of
// listing and decoding them again (a list of the job records of 10,000
// jobs is megabytes). A changed index lists the prefix again.
type listCache struct {
	mu  sync.Mutex
	off bool
	m   map[string]cachedList
}

type cachedList struct {
	kvIndex uint64
	pairs   api.KVPairs
}

// SetListCache turns the cache of listings off (or on again), for
// measuring the difference (e2e/nodesim TestScaleRounds).
func (s *Store) SetListCache(on bool) {
	s.lists.mu.Lock()
	defer s.lists.mu.Unlock()
	s.lists.off = !on
	s.lists.m = nil
}

// listPairs lists prefix, or reuses its last listing when Consul's KV index
// has not moved since.
func (s *Store) listPairs(ctx context.Context, prefix string) (api.KVPairs, error) {
	q := func() *api.QueryOptions { return (&api.QueryOptions{}).WithContext(ctx) }
	s.lists.mu.Lock()
	off := s.lists.off
	s.lists.mu.Unlock()
	var index uint64
	if !off {
		// Without an index (the probe failed), the prefix is listed.
		if i, err := s.kvIndex(ctx, prefix); err == nil {
			index = i
			s.lists.mu.Lock()
			c, ok := s.lists.m[prefix]
			s.lists.mu.Unlock()
			if ok && c.kvIndex == index {
				return c.pairs, nil
			}
		}
	}
	pairs, _, err := s.api.KV().List(prefix, q())
	if err != nil {
		return nil, err
	}
	if index > 0 {
		s.lists.mu.Lock()
		if s.lists.m == nil {
			s.lists.m = map[string]cachedList{}
		}
		s.lists.m[prefix] = cachedList{kvIndex: index, pairs: pairs}
		s.lists.mu.Unlock()
	}
	return pairs, nil
}

// ChangeMark is Consul's KV index, read as the listing cache reads it (a
// read of a key no record has, under the job leases' prefix, which the
// planner's token may read): every write to KV raises it, so an equal mark
// means nothing the planner reads changed (planner.ChangeMarker).
func (s *Store) ChangeMark(ctx context.Context) (string, error) {
	index, err := s.kvIndex(ctx, lease.JobPrefix())
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(index, 10), nil
}

// kvIndex reads Consul's KV index by reading prefix's probeKey, which no
// record has; an error when the read fails, the key exists or no index
// came back.
func (s *Store) kvIndex(ctx context.Context, prefix string) (uint64, error) {
	pair, meta, err := s.api.KV().Get(prefix+probeKey, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("read Consul's KV index: %w", err)
	}
	if pair != nil || meta == nil || meta.LastIndex == 0 {
		return 0, errors.New("read Consul's KV index: the probe key exists or no index came back")
	}
	return meta.LastIndex, nil
}
