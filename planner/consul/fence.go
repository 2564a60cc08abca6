package consul

import (
	"errors"
	"sync"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// The fence. While a planner leads, every write it makes to Consul is a
// transaction that also checks that the leader lock is still held by its
// session (a check-session operation on lease.LeaderKey, appended last). A
// planner whose session Consul has invalidated (its liveness check went
// critical, say, while it was paused or cut off) cannot commit any lease,
// record or status write, even before it notices that it lost the lock:
// the standby that took over is the only one whose writes go through.

// fence is the session the Store's writes are fenced by. A Store that has
// never led (tests, `themis check`) writes unfenced; one that leads checks
// its session in every write; one that led and lost the lock (or let it go)
// is deposed and writes nothing until it leads again.
type fence struct {
	mu      sync.Mutex
	session string
	deposed bool
}

func (f *fence) lead(session string) {
	f.mu.Lock()
	f.session, f.deposed = session, false
	f.mu.Unlock()
}

func (f *fence) depose() {
	f.mu.Lock()
	f.session, f.deposed = "", true
	f.mu.Unlock()
}

func (f *fence) get() (session string, deposed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.session, f.deposed
}

// ErrNotLeader is the error of a write that the fence refused: the leader
// lock is not (or no longer) held by this planner's session.
var ErrNotLeader = errors.New("not the leader: the leader lock " + lease.LeaderKey + " is not held by this planner's session (another planner leads now)")

// fenced returns ops with the fence's check appended, and whether it was;
// ErrNotLeader where the Store was deposed.
func (s *Store) fenced(ops api.TxnOps) (api.TxnOps, bool, error) {
	session, deposed := s.fence.get()
	switch {
	case deposed:
		return nil, false, ErrNotLeader
	case session == "":
		return ops, false, nil
	}
	out := make(api.TxnOps, 0, len(ops)+1)
	out = append(out, ops...)
	return append(out, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: lease.LeaderKey, Session: session}}), true, nil
}
