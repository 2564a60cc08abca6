package consul

import (
	"context"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// LeaderKey is the Consul lock that one planner holds at a time; the others
// wait as standbys. The lock is tied to a Consul session, so if the leader
// dies its session expires and a standby takes over. Leases are not tied to
// the session: running jobs keep their GPUs through a failover.
const LeaderKey = lease.Root + "planner/leader"

// Lead blocks until this planner holds the leader lock (or ctx ends), then
// returns a context that is cancelled when leadership is lost, and a func
// that releases the lock.
func (s *Store) Lead(ctx context.Context, identity string) (context.Context, func(), error) {
	lock, err := s.api.LockOpts(&api.LockOptions{
		Key:            LeaderKey,
		Value:          []byte(identity),
		SessionName:    "themis-planner " + identity,
		SessionTTL:     "15s",
		MonitorRetries: 5,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("leader lock %s: %w", LeaderKey, err)
	}
	lost, err := lock.Lock(ctx.Done())
	if err != nil {
		return nil, nil, fmt.Errorf("acquire leader lock %s: %w", LeaderKey, err)
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
