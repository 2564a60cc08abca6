// Package consul is the planner's thin adapter to Consul: GPU leases in KV
// (written in one transaction per grant, check-and-set so that no GPU is
// leased twice), the job records and per-job status records for operators
// (their types, like every record's, are planner/lease's; this package does
// their I/O), and the leader lock that lets a standby planner take over.
package consul

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// Store reads and writes themis keys in Consul KV.
type Store struct {
	api     *api.Client
	fence   fence       // the leader's session while it leads (fence.go)
	lists   listCache   // listings reused while the KV index stands (cache.go)
	decodes decodeCache // values decoded once (decoded.go)
}

// NewStore wraps a Consul API client.
func NewStore(c *api.Client) *Store { return &Store{api: c} }

// Leases lists the job leases, keyed by job; one that cannot be used is
// named in an *UnreadableError, returned with the rest.
func (s *Store) Leases(ctx context.Context) (map[core.JobKey]lease.JobLease, error) {
	return listByJob(ctx, s, lease.JobPrefix(), leaseJob, nil)
}

// Grant writes a job lease and one key per GPU in one transaction. Every key
// is created with check-and-set index 0, so the transaction fails as a whole
// if any GPU (or the job) already has a lease.
func (s *Store) Grant(ctx context.Context, l lease.JobLease) error {
	ops := make(api.TxnOps, 0, len(l.GPUs)+1)
	jl, err := l.Value()
	if err != nil {
		return err
	}
	ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: lease.JobKey(l.Namespace, l.JobID), Value: jl, Index: 0}})
	for _, gl := range l.GPULeases() {
		v, err := gl.Value()
		if err != nil {
			return err
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: lease.GPUKey(gl.GPU), Value: v, Index: 0}})
	}
	return s.txn(ctx, "grant", l, ops)
}

// Release deletes a job lease and those GPU keys that still belong to it, in
// one transaction, check-and-set on the indexes it read. When rec is not nil
// the same transaction writes the job's record (check-and-set on the index
// it was read at), so the service a lease gave is counted exactly once, and
// rec gets its new index.
func (s *Store) Release(ctx context.Context, l lease.JobLease, rec *lease.JobRecord) error {
	kv := s.api.KV()
	q := (&api.QueryOptions{}).WithContext(ctx)
	var ops api.TxnOps
	jp, _, err := kv.Get(lease.JobKey(l.Namespace, l.JobID), q)
	if err != nil {
		return fmt.Errorf("release %s: %w", l.JobID, err)
	}
	if jp != nil {
		var cur lease.JobLease
		if json.Unmarshal(jp.Value, &cur) == nil && cur.LeaseID == l.LeaseID {
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: jp.Key, Index: jp.ModifyIndex}})
		}
	}
	for _, g := range l.GPUs {
		p, _, err := kv.Get(lease.GPUKey(g), q)
		if err != nil {
			return fmt.Errorf("release %s: %w", l.JobID, err)
		}
		if p == nil {
			continue
		}
		var gl lease.GPULease
		if json.Unmarshal(p.Value, &gl) == nil && gl.LeaseID != l.LeaseID {
			continue // not ours (never expected: grants are CAS-created)
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: p.Key, Index: p.ModifyIndex}})
	}
	if len(ops) == 0 {
		return nil
	}
	if len(l.Parts) > 0 {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteTree, Key: lease.GangPrefix(l.Namespace, l.JobID, l.LeaseID)}})
	}
	if rec != nil {
		op, err := recordOp(*rec)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	resp, err := s.txnOps(ctx, fmt.Sprintf("release lease %s for %s/%s", l.LeaseID, l.Namespace, l.JobID), ops)
	if err != nil {
		return err
	}
	if rec != nil {
		*rec = lease.WithIndex(*rec, resp.Results[len(resp.Results)-1].KV.ModifyIndex)
	}
	return nil
}

// Revoke marks a job's lease as being taken back, check-and-set on the lease
// key, so the mark is written once: it returns the lease as it stands after
// the call (with the earlier mark if another planner was first). The GPU
// keys stay: the GPUs are the victim's until its allocation is terminal.
func (s *Store) Revoke(ctx context.Context, l lease.JobLease, r lease.Revoke) (lease.JobLease, error) {
	key := lease.JobKey(l.Namespace, l.JobID)
	p, _, err := s.api.KV().Get(key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return l, fmt.Errorf("revoke %s: %w", key, err)
	}
	if p == nil {
		return l, fmt.Errorf("revoke lease %s of %s/%s: the lease is gone", l.LeaseID, l.Namespace, l.JobID)
	}
	var cur lease.JobLease
	if err := json.Unmarshal(p.Value, &cur); err != nil {
		return l, fmt.Errorf("decode %s: %w", key, err)
	}
	if cur.LeaseID != l.LeaseID {
		return l, fmt.Errorf("revoke lease %s of %s/%s: the job now holds lease %s", l.LeaseID, l.Namespace, l.JobID, cur.LeaseID)
	}
	if cur.Revoke != nil {
		return cur, nil
	}
	cur.Revoke = &r
	v, err := cur.Value()
	if err != nil {
		return l, err
	}
	ops := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: v, Index: p.ModifyIndex}}}
	if err := s.txn(ctx, "revoke", l, ops); err != nil {
		return l, err
	}
	return cur, nil
}

func (s *Store) txn(ctx context.Context, what string, l lease.JobLease, ops api.TxnOps) error {
	_, err := s.txnOps(ctx, fmt.Sprintf("%s lease %s for %s/%s", what, l.LeaseID, l.Namespace, l.JobID), ops)
	return err
}

// SetVersions writes onto a job's lease the job versions the planner
// registers under it: l.Pinned, and l.Revoke.Suspends while it is being
// taken back (docs/adversary.md, part 3), check-and-set on the lease key.
// It returns the lease as it stands after the call; a lease that is gone
// or now another is left alone.
func (s *Store) SetVersions(ctx context.Context, l lease.JobLease) (lease.JobLease, error) {
	key := lease.JobKey(l.Namespace, l.JobID)
	p, _, err := s.api.KV().Get(key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return l, fmt.Errorf("record the versions of lease %s: %w", key, err)
	}
	if p == nil {
		return l, fmt.Errorf("record the versions of lease %s of %s/%s: the lease is gone", l.LeaseID, l.Namespace, l.JobID)
	}
	var cur lease.JobLease
	if err := json.Unmarshal(p.Value, &cur); err != nil {
		return l, fmt.Errorf("decode %s: %w", key, err)
	}
	if cur.LeaseID != l.LeaseID {
		return l, fmt.Errorf("record the versions of lease %s of %s/%s: the job now holds lease %s", l.LeaseID, l.Namespace, l.JobID, cur.LeaseID)
	}
	cur.Pinned = l.Pinned
	if cur.Revoke != nil && l.Revoke != nil {
		cur.Revoke.Suspends = l.Revoke.Suspends
	}
	v, err := cur.Value()
	if err != nil {
		return l, err
	}
	if err := s.txn(ctx, "record the versions of", l, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: v, Index: p.ModifyIndex}}}); err != nil {
		return l, err
	}
	return cur, nil
}
