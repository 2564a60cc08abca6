package consul

import (
	"context"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// Records lists every job record (lease.JobRecord), each with the
// ModifyIndex it was read at (a record that cannot be used is left out and
// named in an *UnreadableError, returned with the rest).
func (s *Store) Records(ctx context.Context) (map[core.JobKey]lease.JobRecord, error) {
	return listByJob(ctx, s, lease.RecordPrefix, lease.JobRecord.Key, lease.WithIndex)
}

// PutRecord writes a record, check-and-set on the index it was read at (0
// creates it). It returns the record with its new index.
func (s *Store) PutRecord(ctx context.Context, r lease.JobRecord) (lease.JobRecord, error) {
	op, err := recordOp(r)
	if err != nil {
		return r, err
	}
	resp, err := s.txnOps(ctx, "write record of "+r.Key().String(), api.TxnOps{op})
	if err != nil {
		return r, err
	}
	return lease.WithIndex(r, resp.Results[0].KV.ModifyIndex), nil
}

// DeleteRecord removes a job's record and its checkpoint record (the job
// finished or left Nomad).
func (s *Store) DeleteRecord(ctx context.Context, k core.JobKey) error {
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: lease.RecordKey(k)}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: lease.CheckpointKey(k.Namespace, k.ID)}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: lease.ProgressKey(k.Namespace, k.ID)}},
	}
	_, err := s.txnOps(ctx, "delete the records of "+k.String(), ops)
	return err
}

// recordOp writes r, check-and-set on the index it was read at (0 creates
// it).
func recordOp(r lease.JobRecord) (*api.TxnOp, error) {
	v, err := r.Value()
	if err != nil {
		return nil, err
	}
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: lease.RecordKey(r.Key()), Value: v, Index: r.Index()}}, nil
}

// txnOps runs a transaction and turns a rollback into an error that names the
// key that failed.
//
// While the Store leads, the transaction is fenced (fence.go): it also
// checks that the leader lock is still this planner's, and a rollback on
// that check is ErrNotLeader.
func (s *Store) txnOps(ctx context.Context, what string, ops api.TxnOps) (*api.TxnResponse, error) {
	all, fenced, err := s.fenced(ops)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	ok, resp, _, err := s.api.Txn().Txn(all, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, aclErr(fmt.Errorf("%s: %w", what, err), what, opKey(all, 0), "write")
	}
	if !ok {
		if fenced && failedAt(resp, len(all)-1) {
			return nil, fmt.Errorf("%s: %w", what, ErrNotLeader)
		}
		return nil, &opError{index: failedOp(resp), err: aclErr(fmt.Errorf("%s: %s", what, rollback(resp, all)), what, opKey(all, failedOp(resp)), "write")}
	}
	if n := len(resp.Results); fenced && n > 0 && resp.Results[n-1].KV != nil && resp.Results[n-1].KV.Key == lease.LeaderKey {
		// The fence's check returns the lock's entry: the callers' results
		// are those of their own operations.
		resp.Results = resp.Results[:n-1]
	}
	return resp, nil
}

// failedAt reports whether operation i of a rolled back transaction failed.
func failedAt(resp *api.TxnResponse, i int) bool {
	if resp == nil {
		return false
	}
	for _, e := range resp.Errors {
		if e.OpIndex == i {
			return true
		}
	}
	return false
}

// failedOp is the index of the first failed operation of a rolled back
// transaction (0 when it does not say).
func failedOp(resp *api.TxnResponse) int {
	if resp != nil && len(resp.Errors) > 0 {
		return resp.Errors[0].OpIndex
	}
	return 0
}

// opKey is the key of operation i, or "" when it has none.
func opKey(ops api.TxnOps, i int) string {
	if i < len(ops) && ops[i].KV != nil {
		return ops[i].KV.Key
	}
	return ""
}

func rollback(resp *api.TxnResponse, ops api.TxnOps) string {
	msg := "transaction rolled back"
	if resp != nil && len(resp.Errors) > 0 {
		msg = resp.Errors[0].What
		if idx := resp.Errors[0].OpIndex; idx < len(ops) && ops[idx].KV != nil {
			msg = fmt.Sprintf("%s: %s", ops[idx].KV.Key, msg)
		}
	}
	return msg
}

// Checkpoints lists the jobs' newest complete checkpoints, as the task
// driver published them (lease.CheckpointKey); one that cannot be used is
// named in an *UnreadableError, returned with the rest.
func (s *Store) Checkpoints(ctx context.Context) (map[core.JobKey]lease.CheckpointRecord, error) {
	return listByJob(ctx, s, lease.CheckpointPrefix(), func(c lease.CheckpointRecord) core.JobKey {
		return core.JobKey{Namespace: c.Namespace, ID: c.JobID}
	}, nil)
}

// Progress lists the jobs' progress records (lease.ProgressKey), as the
// task drivers published them; one that cannot be used is named in an
// *UnreadableError, returned with the rest.
func (s *Store) Progress(ctx context.Context) (map[core.JobKey]lease.ProgressRecord, error) {
	return listByJob(ctx, s, lease.ProgressPrefix(), func(p lease.ProgressRecord) core.JobKey {
		return core.JobKey{Namespace: p.Namespace, ID: p.JobID}
	}, nil)
}

// put writes value at key (no check-and-set: keys only the leader writes;
// fenced while the Store leads), an ACL refusal naming the rule the
// planner's policy has for it.
func (s *Store) put(ctx context.Context, key string, value []byte) error {
	_, err := s.txnOps(ctx, "write "+key, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVSet, Key: key, Value: value}}})
	return err
}
