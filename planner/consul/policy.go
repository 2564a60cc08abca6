package consul

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// PolicyState reads a policy's recorded state; nil when there is none.
func (s *Store) PolicyState(ctx context.Context, name string) ([]byte, error) {
	p, _, err := s.api.KV().Get(lease.PolicyKey(name), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lease.PolicyKey(name), err)
	}
	if p == nil {
		return nil, nil
	}
	b, err := unpack(p.Value)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lease.PolicyKey(name), err)
	}
	return b, nil
}

// PutPolicyState records a policy's state (gzip'd when large: packed.go).
func (s *Store) PutPolicyState(ctx context.Context, name string, state []byte) error {
	return s.putPacked(ctx, lease.PolicyKey(name), state)
}

// SetLeaseEnd writes a new end time into a job's lease key (a lease the
// policy renewed), check-and-set, only while the key holds that lease and
// is not being revoked.
func (s *Store) SetLeaseEnd(ctx context.Context, l lease.JobLease) error {
	key := lease.JobKey(l.Namespace, l.JobID)
	p, _, err := s.api.KV().Get(key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("renew %s: %w", key, err)
	}
	if p == nil {
		return nil
	}
	var cur lease.JobLease
	if err := json.Unmarshal(p.Value, &cur); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	if cur.LeaseID != l.LeaseID || cur.Revoke != nil {
		return nil
	}
	cur.Ends = l.Ends
	v, err := cur.Value()
	if err != nil {
		return err
	}
	return s.txn(ctx, "renew", l, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: v, Index: p.ModifyIndex}}})
}

// PutAuction records the last auction round's result (gzip'd when
// large: packed.go).
func (s *Store) PutAuction(ctx context.Context, report []byte) error {
	return s.putPacked(ctx, lease.AuctionKey, report)
}

// Auction reads the last auction round's result; nil when none ran.
func (s *Store) Auction(ctx context.Context) ([]byte, error) {
	p, _, err := s.api.KV().Get(lease.AuctionKey, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || p == nil {
		return nil, err
	}
	return unpack(p.Value)
}
