package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// JobRecord is a job's scheduling history: what the decision core's service
// accounting needs (attained service, preemptions, first submit) and could
// not rebuild from Nomad alone. It is written when the planner first sees the
// job, when a lease of the job ends, and when Tiresias promotes it; it is
// deleted when the job finishes or leaves Nomad.
type JobRecord struct {
	Namespace string `json:"namespace"`
	JobID     string `json:"job_id"`
	// FirstSubmit is when the planner first saw the job queued; it orders
	// FIFO queues, as the job's own SubmitTime changes with every pin.
	FirstSubmit time.Time `json:"first_submit"`
	// FirstStart is when the job first ran (zero: never).
	FirstStart time.Time `json:"first_start,omitzero"`
	// Executed is the seconds the job ran under leases that have ended,
	// and Attained the GPU-seconds (Executed x GPUs of each lease).
	Executed float64 `json:"executed_s"`
	Attained float64 `json:"attained_gpu_s"`
	// Preemptions counts the leases taken back from the job.
	Preemptions int `json:"preemptions"`
	// LastLease is the last lease whose service was added, so that a
	// release replayed after a crash is not counted twice.
	LastLease string `json:"last_lease,omitempty"`
	// Suspended is the job version the planner's suspension of LastLease
	// registered (count 0, in the pending pool): the job waits for its next
	// grant only at that version; at any other it is the user's (finished
	// when dead, a new submission otherwise). Nil before planners recorded
	// it (docs/adversary.md, part 3).
	Suspended *lease.JobVersion `json:"suspended,omitempty"`
	// PromotedAt and ExecutedAtPromotion record Tiresias's last starvation
	// promotion, which resets the job's executed and waited counters.
	PromotedAt          time.Time `json:"promoted_at,omitzero"`
	ExecutedAtPromotion float64   `json:"executed_at_promotion_s,omitempty"`

	// index is the record's ModifyIndex when read (0: not in Consul), for
	// check-and-set.
	index uint64
}

// Index is the Consul ModifyIndex the record was read at (0: new).
func (r JobRecord) Index() uint64 { return r.index }

// Key is the job the record is about.
func (r JobRecord) Key() core.JobKey { return core.JobKey{Namespace: r.Namespace, ID: r.JobID} }

// Records lists every job record (a record that cannot be used is left
// out and named in an *UnreadableError, returned with the rest).
func (s *Store) Records(ctx context.Context) (map[core.JobKey]JobRecord, error) {
	return listByJob(ctx, s, lease.RecordPrefix, JobRecord.Key, WithIndex)
}

// PutRecord writes a record, check-and-set on the index it was read at (0
// creates it). It returns the record with its new index.
func (s *Store) PutRecord(ctx context.Context, r JobRecord) (JobRecord, error) {
	op, err := recordOp(r)
	if err != nil {
		return r, err
	}
	resp, err := s.txnOps(ctx, "write record of "+r.Key().String(), api.TxnOps{op})
	if err != nil {
		return r, err
	}
	r.index = resp.Results[0].KV.ModifyIndex
	return r, nil
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

func recordOp(r JobRecord) (*api.TxnOp, error) {
	v, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: lease.RecordKey(r.Key()), Value: v, Index: r.index}}, nil
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
		return nil, aclErr(fmt.Errorf("%s: %s", what, rollback(resp, all)), what, opKey(all, failedOp(resp)), "write")
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

// WithIndex returns r as if read at a Consul ModifyIndex: what Records
// does with each record it lists, and what stores that stand in for
// Consul (tests) do.
func WithIndex(r JobRecord, index uint64) JobRecord {
	r.index = index
	return r
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
