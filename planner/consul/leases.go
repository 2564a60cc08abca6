// Package consul is the planner's thin adapter to Consul: GPU leases in KV
// (written in one transaction per grant, check-and-set so that no GPU is
// leased twice), per-job status records for operators, and the leader lock
// that lets a standby planner take over.
package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// Store reads and writes themis keys in Consul KV.
type Store struct {
	api *api.Client
}

// NewStore wraps a Consul API client.
func NewStore(c *api.Client) *Store { return &Store{api: c} }

// Leases lists the job leases, keyed by job.
func (s *Store) Leases(ctx context.Context) (map[core.JobKey]lease.JobLease, error) {
	pairs, _, err := s.api.KV().List(lease.JobPrefix(), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", lease.JobPrefix(), err)
	}
	out := make(map[core.JobKey]lease.JobLease, len(pairs))
	for _, p := range pairs {
		var l lease.JobLease
		if err := json.Unmarshal(p.Value, &l); err != nil {
			return nil, fmt.Errorf("decode %s: %w", p.Key, err)
		}
		out[core.JobKey{Namespace: l.Namespace, ID: l.JobID}] = l
	}
	return out, nil
}

// Grant writes a job lease and one key per GPU in one transaction. Every key
// is created with check-and-set index 0, so the transaction fails as a whole
// if any GPU (or the job) already has a lease.
func (s *Store) Grant(ctx context.Context, l lease.JobLease) error {
	ops := make(api.TxnOps, 0, len(l.GPUs)+1)
	jl, err := json.Marshal(l)
	if err != nil {
		return err
	}
	ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: lease.JobKey(l.Namespace, l.JobID), Value: jl, Index: 0}})
	for _, gl := range l.GPULeases() {
		v, err := json.Marshal(gl)
		if err != nil {
			return err
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: lease.GPUKey(gl.GPU), Value: v, Index: 0}})
	}
	return s.txn(ctx, "grant", l, ops)
}

// Release deletes a job lease and those GPU keys that still belong to it, in
// one transaction, check-and-set on the indexes it read.
func (s *Store) Release(ctx context.Context, l lease.JobLease) error {
	kv := s.api.KV()
	q := (&api.QueryOptions{}).WithContext(ctx)
	var ops api.TxnOps
	jp, _, err := kv.Get(lease.JobKey(l.Namespace, l.JobID), q)
	if err != nil {
		return fmt.Errorf("release %s: %w", l.JobID, err)
	}
	if jp != nil {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: jp.Key, Index: jp.ModifyIndex}})
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
	return s.txn(ctx, "release", l, ops)
}

func (s *Store) txn(ctx context.Context, what string, l lease.JobLease, ops api.TxnOps) error {
	ok, resp, _, err := s.api.Txn().Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("%s lease %s for %s/%s: %w", what, l.LeaseID, l.Namespace, l.JobID, err)
	}
	if !ok {
		msg := "transaction rolled back"
		if resp != nil && len(resp.Errors) > 0 {
			msg = resp.Errors[0].What
			if idx := resp.Errors[0].OpIndex; idx < len(ops) && ops[idx].KV != nil {
				msg = fmt.Sprintf("%s: %s", ops[idx].KV.Key, msg)
			}
		}
		return fmt.Errorf("%s lease %s for %s/%s: %s", what, l.LeaseID, l.Namespace, l.JobID, msg)
	}
	return nil
}

// JobStatus is what the planner last decided about a job, for operators
// (Consul UI under themis/status/) and `themis status`.
type JobStatus struct {
	Namespace string    `json:"namespace"`
	JobID     string    `json:"job_id"`
	State     string    `json:"state"` // queued, granted, rejected, finished
	Reason    string    `json:"reason,omitempty"`
	Node      string    `json:"node,omitempty"`
	GPUs      []string  `json:"gpus,omitempty"`
	LeaseID   string    `json:"lease_id,omitempty"`
	Since     time.Time `json:"since"`
}

// StatusPrefix is where job status records live.
const StatusPrefix = lease.Root + "status/"

// StatusKey is the key of one job's status record.
func StatusKey(k core.JobKey) string {
	return StatusPrefix + url.PathEscape(k.Namespace) + "/" + url.PathEscape(k.ID)
}

// PutStatus writes a job's status record.
func (s *Store) PutStatus(ctx context.Context, st JobStatus) error {
	v, err := json.Marshal(st)
	if err != nil {
		return err
	}
	key := StatusKey(core.JobKey{Namespace: st.Namespace, ID: st.JobID})
	if _, err := s.api.KV().Put(&api.KVPair{Key: key, Value: v}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// DeleteStatus removes a job's status record (the job is gone from Nomad).
func (s *Store) DeleteStatus(ctx context.Context, k core.JobKey) error {
	if _, err := s.api.KV().Delete(StatusKey(k), (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("delete %s: %w", StatusKey(k), err)
	}
	return nil
}

// Statuses lists all job status records.
func (s *Store) Statuses(ctx context.Context) ([]JobStatus, error) {
	pairs, _, err := s.api.KV().List(StatusPrefix, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", StatusPrefix, err)
	}
	out := make([]JobStatus, 0, len(pairs))
	for _, p := range pairs {
		var st JobStatus
		if err := json.Unmarshal(p.Value, &st); err != nil {
			return nil, fmt.Errorf("decode %s: %w", p.Key, err)
		}
		out = append(out, st)
	}
	return out, nil
}
