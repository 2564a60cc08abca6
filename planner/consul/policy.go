package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// PolicyKey is where a stateful policy's state lives (core.Stateful):
// themis/policy/<policy name>, opaque to all but the policy.
func PolicyKey(name string) string { return lease.Root + "policy/" + url.PathEscape(name) }

// PolicyState reads a policy's recorded state; nil when there is none.
func (s *Store) PolicyState(ctx context.Context, name string) ([]byte, error) {
	p, _, err := s.api.KV().Get(PolicyKey(name), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", PolicyKey(name), err)
	}
	if p == nil {
		return nil, nil
	}
	return p.Value, nil
}

// PutPolicyState records a policy's state.
func (s *Store) PutPolicyState(ctx context.Context, name string, state []byte) error {
	return s.put(ctx, PolicyKey(name), state)
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

// AuctionKey holds the last auction round's result per app (Themis), for
// operators: the Consul UI and `themis status -apps`.
const AuctionKey = lease.Root + "auction/last"

// PutAuction records the last auction round's result.
func (s *Store) PutAuction(ctx context.Context, report []byte) error {
	return s.put(ctx, AuctionKey, report)
}

// Auction reads the last auction round's result; nil when none ran.
func (s *Store) Auction(ctx context.Context) ([]byte, error) {
	p, _, err := s.api.KV().Get(AuctionKey, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || p == nil {
		return nil, err
	}
	return p.Value, nil
}
