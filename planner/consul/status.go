package consul

import (
	"context"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// MaxTxnOps is the most operations Consul accepts in one transaction
// (maxTxnOps in Consul's agent/txn_endpoint.go: 128 in v1.22.0, the agent
// e2e/agents/build.sh pins; 64 in older ones, hashicorp/consul#2921). A
// longer transaction is refused whole (413 Request Entity Too Large). A
// chunk of status writes holds one fewer, for the leader's fence (fence.go).
const MaxTxnOps = 128

// maxTxnValueBytes bounds the values written in one transaction, well
// under Consul's default txn_max_req_len (512 KiB, the whole request with
// its base64-encoded values), so a chunk of long reasons is not refused.
const maxTxnValueBytes = 128 << 10

// WriteStatuses writes puts and deletes the records of dels (jobs gone from
// Nomad) in as few Consul transactions as the limits allow: one for up to
// MaxTxnOps records, in order, puts first. It returns how many of them,
// counted in that order, Consul committed: all of them when err is nil,
// those of the transactions before the one that failed otherwise.
func (s *Store) WriteStatuses(ctx context.Context, puts []lease.JobStatus, dels []core.JobKey) (int, error) {
	ops := make(api.TxnOps, 0, len(puts)+len(dels))
	for _, st := range puts {
		v, err := st.Value()
		if err != nil {
			return 0, err
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: lease.StatusKey(st.Key()), Value: v}})
	}
	for _, k := range dels {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: lease.StatusKey(k)}})
	}
	done := 0
	for _, chunk := range txnChunks(ops) {
		what := fmt.Sprintf("write %d status records (%d to %d of %d)", len(chunk), done+1, done+len(chunk), len(ops))
		if _, err := s.txnOps(ctx, what, chunk); err != nil {
			return done, err
		}
		done += len(chunk)
	}
	return done, nil
}

// txnChunks cuts ops, in order, into transactions of at most MaxTxnOps
// operations and maxTxnValueBytes of values (a single larger value gets a
// transaction of its own).
func txnChunks(ops api.TxnOps) []api.TxnOps {
	var out []api.TxnOps
	start, bytes := 0, 0
	for i, op := range ops {
		n := len(op.KV.Value)
		if i > start && (i-start == MaxTxnOps-1 || bytes+n > maxTxnValueBytes) {
			out = append(out, ops[start:i])
			start, bytes = i, 0
		}
		bytes += n
	}
	if start < len(ops) {
		out = append(out, ops[start:])
	}
	return out
}

// Statuses lists all job status records (lease.JobStatus); one that cannot
// be used is named in an *UnreadableError, returned with the rest.
func (s *Store) Statuses(ctx context.Context) ([]lease.JobStatus, error) {
	var out []lease.JobStatus
	err := list(ctx, s, lease.StatusPrefix, lease.JobStatus.Key,
		func(st lease.JobStatus, _ uint64) { out = append(out, st) })
	return out, err
}
