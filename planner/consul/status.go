package consul

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
// counted in that order, were dealt with: all of them unless a transaction
// failed as a whole (Consul unreachable), those before it otherwise.
//
// One record Consul cannot take never stops the others: a write too large
// to send (a key or value over the limits, tooLarge) is not sent, and one
// that rolls its transaction back is taken out of it and the rest sent
// again. Such writes are named, by their place in puts then dels, in a
// *RefusedError (Refused), returned (with the error that stopped the
// batch, if one did) with the count.
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
	var refused []RefusedWrite
	var send api.TxnOps
	var at []int // at[i] is send[i]'s index in ops
	for i, op := range ops {
		if err := tooLarge(op); err != nil {
			refused = append(refused, RefusedWrite{Index: i, Key: op.KV.Key, Err: err})
			continue
		}
		send, at = append(send, op), append(at, i)
	}
	done, sent := 0, 0
	for _, chunk := range txnChunks(send) {
		idx := at[sent : sent+len(chunk)]
		sent += len(chunk)
		r, err := s.writeChunk(ctx, chunk, idx, len(ops))
		refused = append(refused, r...)
		if err != nil {
			return done, joinRefused(refused, err)
		}
		done = idx[len(idx)-1] + 1
	}
	return len(ops), joinRefused(refused, nil)
}

// writeChunk writes one transaction of status writes (idx: their indexes in
// the batch of total), taking out each operation that rolls it back and
// sending the rest again; it returns those it took out, and the error that
// stopped it otherwise.
func (s *Store) writeChunk(ctx context.Context, chunk api.TxnOps, idx []int, total int) ([]RefusedWrite, error) {
	var refused []RefusedWrite
	chunk, idx = slices.Clone(chunk), slices.Clone(idx)
	for len(chunk) > 0 {
		what := fmt.Sprintf("write %d status records (%d to %d of %d)", len(chunk), idx[0]+1, idx[len(idx)-1]+1, total)
		_, err := s.txnOps(ctx, what, chunk)
		var oe *opError
		switch {
		case err == nil:
			return refused, nil
		case errors.As(err, &oe) && oe.index >= 0 && oe.index < len(chunk):
			refused = append(refused, RefusedWrite{Index: idx[oe.index], Key: chunk[oe.index].KV.Key, Err: shortErr(err)})
			chunk = slices.Delete(chunk, oe.index, oe.index+1)
			idx = slices.Delete(idx, oe.index, oe.index+1)
		default:
			return refused, err
		}
	}
	return refused, nil
}

// joinRefused is err with a *RefusedError naming refused, if any.
func joinRefused(refused []RefusedWrite, err error) error {
	if len(refused) == 0 {
		return err
	}
	slices.SortFunc(refused, func(a, b RefusedWrite) int { return a.Index - b.Index })
	return &RefusedError{Writes: refused, Err: err}
}

// txnChunks cuts ops, in order, into transactions of at most MaxTxnOps
// operations and maxTxnValueBytes of keys and values (a single larger one
// gets a transaction of its own).
func txnChunks(ops api.TxnOps) []api.TxnOps {
	var out []api.TxnOps
	start, bytes := 0, 0
	for i, op := range ops {
		n := len(op.KV.Key) + len(op.KV.Value)
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
