package consul

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/aclhint"
	"github.com/themis-nomad/themis/planner/lease"
)

// LeaderKey is the Consul lock that one planner holds at a time; the others
// wait as standbys. The lock is tied to a Consul session, so if the leader
// dies its session expires and a standby takes over. Leases are not tied to
// the session: running jobs keep their GPUs through a failover.
const LeaderKey = lease.Root + "planner/leader"

// LeaderInfo is what the leader lock's value records (JSON): the leading
// planner's identity and, when it serves the HTTP API, the API's address,
// so that a standby can name it.
type LeaderInfo struct {
	ID  string `json:"id"`
	API string `json:"api,omitempty"`
}

// Lead blocks until this planner holds the leader lock (or ctx ends), then
// returns a context that is cancelled when leadership is lost, and a func
// that releases the lock.
func (s *Store) Lead(ctx context.Context, identity string) (context.Context, func(), error) {
	return s.LeadAs(ctx, LeaderInfo{ID: identity})
}

// LeadAs is Lead recording the planner's API address too.
func (s *Store) LeadAs(ctx context.Context, me LeaderInfo) (context.Context, func(), error) {
	value, err := json.Marshal(me)
	if err != nil {
		return nil, nil, err
	}
	lock, err := s.api.LockOpts(&api.LockOptions{
		Key:            LeaderKey,
		Value:          value,
		SessionName:    "themis-planner " + me.ID,
		SessionTTL:     "15s",
		MonitorRetries: 5,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("leader lock %s: %w", LeaderKey, err)
	}
	lost, err := lock.Lock(ctx.Done())
	if err != nil {
		return nil, nil, aclhint.Wrap(fmt.Errorf("acquire leader lock %s: %w", LeaderKey, err), "Consul",
			"the leader lock (a session, then "+LeaderKey+")",
			`session_prefix "" { policy = "write" } and key "`+LeaderKey+`" { policy = "write" }`, PlannerPolicy)
	}
	if lost == nil {
		return nil, nil, ctx.Err()
	}
	lctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-lost:
		case <-lctx.Done():
		}
		cancel()
	}()
	return lctx, func() { cancel(); _ = lock.Unlock() }, nil
}

// Leader reads who holds the leader lock; ok is false when nobody does. A
// value that is not LeaderInfo's JSON (an older planner's) is its identity.
func (s *Store) Leader(ctx context.Context) (l LeaderInfo, ok bool, err error) {
	kv, _, err := s.api.KV().Get(LeaderKey, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return LeaderInfo{}, false, fmt.Errorf("read leader lock %s: %w", LeaderKey, err)
	}
	if kv == nil || kv.Session == "" {
		return LeaderInfo{}, false, nil
	}
	if json.Unmarshal(kv.Value, &l) != nil || l.ID == "" {
		l = LeaderInfo{ID: string(kv.Value)}
	}
	return l, true, nil
}
