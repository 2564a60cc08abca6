package plannertest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// Store keeps leases and records as Consul's KV would.
type Store struct {
	Crash             *Budget
	Index             uint64
	JobLeases         map[core.JobKey]lease.JobLease
	GPUOwners         map[string]string // GPU -> lease ID
	JobRecords        map[core.JobKey]lease.JobRecord
	RecordIndex       map[core.JobKey]uint64
	JobStatuses       map[core.JobKey]lease.JobStatus
	CheckpointRecords map[core.JobKey]lease.CheckpointRecord
	ProgressRecords   map[core.JobKey]lease.ProgressRecord
	PendingGrants     map[core.JobKey]lease.Pending
	PolicyStates      map[string][]byte
	Auction           []byte
	// statusCalls counts WriteStatuses calls; StatusFail, when set, fails
	// them after that many writes were committed.
	StatusCalls int
	StatusFail  *StatusFail
	// lastPuts and lastDels are the last WriteStatuses call's.
	LastPuts []lease.JobStatus
	LastDels []core.JobKey
	// bad are keys whose values cannot be used: each listing leaves out
	// the value under such a key (it stays in the maps above) and names
	// it in a *consul.UnreadableError, as consul.Store does.
	Bad []consul.BadKey
}

// NewStore is an empty KV.
func NewStore() *Store {
	return &Store{JobLeases: map[core.JobKey]lease.JobLease{}, GPUOwners: map[string]string{}, CheckpointRecords: map[core.JobKey]lease.CheckpointRecord{},
		JobRecords: map[core.JobKey]lease.JobRecord{}, RecordIndex: map[core.JobKey]uint64{}, JobStatuses: map[core.JobKey]lease.JobStatus{}}
}

func (s *Store) Leases(context.Context) (map[core.JobKey]lease.JobLease, error) {
	return withoutBad(s, lease.JobPrefix(), maps.Clone(s.JobLeases)), s.unreadable(lease.JobPrefix())
}

func (s *Store) GPULeases(context.Context) (map[string]lease.GPULease, error) {
	out := map[string]lease.GPULease{}
	for _, l := range s.JobLeases {
		for _, g := range l.GPULeases() {
			out[g.GPU] = g
		}
	}
	return out, nil
}

func (s *Store) Grant(_ context.Context, l lease.JobLease) error {
	if err := s.Crash.Spend(); err != nil {
		return err
	}
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	if _, ok := s.JobLeases[k]; ok {
		return fmt.Errorf("grant %s: job already leased", k)
	}
	for _, g := range l.GPUs {
		if _, ok := s.GPUOwners[g]; ok {
			return fmt.Errorf("grant %s: GPU %s already leased", k, g)
		}
	}
	s.JobLeases[k] = l
	for _, g := range l.GPUs {
		s.GPUOwners[g] = l.LeaseID
	}
	return nil
}

func (s *Store) Revoke(_ context.Context, l lease.JobLease, r lease.Revoke) (lease.JobLease, error) {
	if err := s.Crash.Spend(); err != nil {
		return l, err
	}
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	cur, ok := s.JobLeases[k]
	if !ok || cur.LeaseID != l.LeaseID {
		return l, fmt.Errorf("revoke %s: lease gone", k)
	}
	if cur.Revoke == nil {
		cur.Revoke = &r
		s.JobLeases[k] = cur
	}
	return cur, nil
}

func (s *Store) SetVersions(_ context.Context, l lease.JobLease) (lease.JobLease, error) {
	if err := s.Crash.Spend(); err != nil {
		return l, err
	}
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	cur, ok := s.JobLeases[k]
	if !ok || cur.LeaseID != l.LeaseID {
		return l, fmt.Errorf("set versions %s: lease gone", k)
	}
	cur.Pinned = l.Pinned
	if cur.Revoke != nil && l.Revoke != nil {
		r := *cur.Revoke
		r.Suspends = l.Revoke.Suspends
		cur.Revoke = &r
	}
	s.JobLeases[k] = cur
	return cur, nil
}

func (s *Store) Release(_ context.Context, l lease.JobLease, rec *lease.JobRecord) error {
	if err := s.Crash.Spend(); err != nil {
		return err
	}
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	cur, ok := s.JobLeases[k]
	if !ok || cur.LeaseID != l.LeaseID {
		return nil
	}
	if rec != nil && s.RecordIndex[k] != rec.Index() {
		return fmt.Errorf("release %s: record changed", k)
	}
	delete(s.JobLeases, k)
	for _, g := range l.GPUs {
		if s.GPUOwners[g] == l.LeaseID {
			delete(s.GPUOwners, g)
		}
	}
	if rec != nil {
		s.Index++
		s.JobRecords[k], s.RecordIndex[k] = *rec, s.Index
		*rec = lease.WithIndex(*rec, s.Index)
	}
	return nil
}

func (s *Store) Records(context.Context) (map[core.JobKey]lease.JobRecord, error) {
	out := map[core.JobKey]lease.JobRecord{}
	for k, r := range s.JobRecords {
		out[k] = lease.WithIndex(r, s.RecordIndex[k])
	}
	return withoutBad(s, lease.RecordPrefix, out), s.unreadable(lease.RecordPrefix)
}

func (s *Store) PutRecord(_ context.Context, r lease.JobRecord) (lease.JobRecord, error) {
	if err := s.Crash.Spend(); err != nil {
		return r, err
	}
	k := r.Key()
	if s.RecordIndex[k] != r.Index() {
		return r, fmt.Errorf("put record %s: changed", k)
	}
	s.Index++
	s.JobRecords[k], s.RecordIndex[k] = r, s.Index
	return lease.WithIndex(r, s.Index), nil
}

func (s *Store) DeleteRecord(_ context.Context, k core.JobKey) error {
	if err := s.Crash.Spend(); err != nil {
		return err
	}
	delete(s.JobRecords, k)
	delete(s.RecordIndex, k)
	delete(s.CheckpointRecords, k)
	return nil
}

func (s *Store) Checkpoints(context.Context) (map[core.JobKey]lease.CheckpointRecord, error) {
	return withoutBad(s, lease.CheckpointPrefix(), maps.Clone(s.CheckpointRecords)), s.unreadable(lease.CheckpointPrefix())
}

func (s *Store) Progress(context.Context) (map[core.JobKey]lease.ProgressRecord, error) {
	return withoutBad(s, lease.ProgressPrefix(), maps.Clone(s.ProgressRecords)), s.unreadable(lease.ProgressPrefix())
}

func (s *Store) Pending(context.Context) (map[core.JobKey]lease.Pending, error) {
	return withoutBad(s, lease.PendingPrefix(), maps.Clone(s.PendingGrants)), s.unreadable(lease.PendingPrefix())
}

func (s *Store) PutPending(_ context.Context, pg lease.Pending) error {
	if err := s.Crash.Spend(); err != nil {
		return err
	}
	if s.PendingGrants == nil {
		s.PendingGrants = map[core.JobKey]lease.Pending{}
	}
	s.PendingGrants[core.JobKey{Namespace: pg.Namespace, ID: pg.JobID}] = pg
	return nil
}

func (s *Store) DeletePending(_ context.Context, k core.JobKey) error {
	if err := s.Crash.Spend(); err != nil {
		return err
	}
	delete(s.PendingGrants, k)
	return nil
}

func (s *Store) PolicyState(_ context.Context, name string) ([]byte, error) {
	return s.PolicyStates[name], nil
}

func (s *Store) PutPolicyState(_ context.Context, name string, state []byte) error {
	if err := s.Crash.Spend(); err != nil {
		return err
	}
	if s.PolicyStates == nil {
		s.PolicyStates = map[string][]byte{}
	}
	s.PolicyStates[name] = slices.Clone(state)
	return nil
}

func (s *Store) PutAuction(_ context.Context, report []byte) error {
	s.Auction = slices.Clone(report)
	return nil
}

func (s *Store) SetLeaseEnd(_ context.Context, l lease.JobLease) error {
	if err := s.Crash.Spend(); err != nil {
		return err
	}
	if cur, ok := s.JobLeases[core.JobKey{Namespace: l.Namespace, ID: l.JobID}]; ok && cur.LeaseID == l.LeaseID && cur.Revoke == nil {
		cur.Ends = l.Ends
		s.JobLeases[core.JobKey{Namespace: l.Namespace, ID: l.JobID}] = cur
	}
	return nil
}

func (s *Store) Statuses(context.Context) ([]lease.JobStatus, error) {
	return slices.Collect(maps.Values(s.JobStatuses)), nil
}

// WriteStatuses commits the writes, puts first, up to StatusFail's: as
// consul.Store.WriteStatuses, where the transaction holding it failed.
func (s *Store) WriteStatuses(_ context.Context, puts []lease.JobStatus, dels []core.JobKey) (int, error) {
	s.StatusCalls++
	s.LastPuts, s.LastDels = slices.Clone(puts), slices.Clone(dels)
	n := 0
	for _, st := range puts {
		if s.StatusFail != nil && n >= s.StatusFail.After {
			return n, s.StatusFail.Err
		}
		s.JobStatuses[core.JobKey{Namespace: st.Namespace, ID: st.JobID}] = st
		n++
	}
	for _, k := range dels {
		if s.StatusFail != nil && n >= s.StatusFail.After {
			return n, s.StatusFail.Err
		}
		delete(s.JobStatuses, k)
		n++
	}
	return n, nil
}

// StatusFail makes Store.WriteStatuses fail with Err once After writes
// were committed (a transaction that failed part way).
type StatusFail struct {
	After int
	Err   error
}

// What the fake does with records that cannot be read: as the real
// adapter, a listing returns what it can use with a
// *consul.UnreadableError naming the others (Store.Bad).

// unreadable is the error a listing under prefix returns with what it
// could use.
func (s *Store) unreadable(prefix string) error {
	var keys []consul.BadKey
	for _, b := range s.Bad {
		if strings.HasPrefix(b.Key, prefix) {
			keys = append(keys, b)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return &consul.UnreadableError{Keys: keys}
}

// withoutBad deletes from m (a copy the listing hands out) the entries
// under prefix that s.Bad names, and returns it.
func withoutBad[V any](s *Store, prefix string, m map[core.JobKey]V) map[core.JobKey]V {
	for _, b := range s.Bad {
		if strings.HasPrefix(b.Key, prefix) {
			delete(m, b.Job)
		}
	}
	return m
}
