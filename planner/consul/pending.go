package consul

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// Pending lists the grants that wait for their GPUs (lease.Pending), keyed
// by job; one that cannot be used is named in an *UnreadableError,
// returned with the rest.
func (s *Store) Pending(ctx context.Context) (map[core.JobKey]lease.Pending, error) {
	return listByJob(ctx, s, lease.PendingPrefix(), func(pg lease.Pending) core.JobKey {
		return core.JobKey{Namespace: pg.Namespace, ID: pg.JobID}
	}, nil)
}

// PutPending records a grant that waits for its GPUs.
func (s *Store) PutPending(ctx context.Context, pg lease.Pending) error {
	v, err := json.Marshal(pg)
	if err != nil {
		return err
	}
	return s.put(ctx, lease.PendingKey(pg.Namespace, pg.JobID), v)
}

// DeletePending removes a job's pending grant (carried out or withdrawn).
func (s *Store) DeletePending(ctx context.Context, k core.JobKey) error {
	key := lease.PendingKey(k.Namespace, k.ID)
	_, err := s.txnOps(ctx, "delete "+key, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}}})
	return err
}
