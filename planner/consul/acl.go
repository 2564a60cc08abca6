package consul

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/aclhint"
	"github.com/themis-nomad/themis/planner/lease"
)

// PlannerPolicy is the file of examples/acl with the planner's Consul policy.
const PlannerPolicy = "planner.consul.hcl"

// WritePrefixes are the KV prefixes the planner writes (and reads): the
// key_prefix rules of examples/acl/planner.consul.hcl.
var WritePrefixes = []string{
	lease.Root + "leases/", lease.RecordPrefix, lease.StatusPrefix, lease.PolicyPrefix, lease.Root + "auction/",
	lease.Root + "checkpoints/", lease.Root + "progress/", lease.Root + "gangs/",
}

// aclErr gives an ACL refusal of a call on key the hint of the planner's
// policy: verb ("read" or "write") on the key's prefix.
func aclErr(err error, call, key, verb string) error {
	return aclhint.Wrap(err, "Consul", call, fmt.Sprintf("key_prefix %q { policy = %q }", aclhint.KeyPrefix(key), verb), PlannerPolicy)
}

// CheckACL checks, without changing anything, that the Store's token may
// write every prefix of WritePrefixes: one transaction deleting a key under
// each that never exists (a no-op Consul still checks against the token's
// rules). It returns an aclhint.Error naming the refused prefixes, or nil;
// other failures (Consul unreachable) are returned as they are, for the
// caller to log: the planner's own calls retry them.
func (s *Store) CheckACL(ctx context.Context) error {
	ops := make(api.TxnOps, 0, len(WritePrefixes))
	for _, p := range WritePrefixes {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: p + ".themis-acl-probe"}})
	}
	ok, resp, _, err := s.api.Txn().Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return aclhint.Wrap(err, "Consul", "the planner's KV transactions (/v1/txn)",
			"a valid token with write on "+strings.Join(WritePrefixes, ", "), PlannerPolicy)
	}
	if ok || resp == nil {
		return nil
	}
	var refused []string
	var first string
	for _, e := range resp.Errors {
		if !aclhint.Denied(fmt.Errorf("%s", e.What)) || e.OpIndex >= len(WritePrefixes) {
			continue
		}
		if first == "" {
			first = e.What
		}
		refused = append(refused, WritePrefixes[e.OpIndex])
	}
	if len(refused) == 0 {
		return fmt.Errorf("consul ACL check: %s", rollback(resp, ops))
	}
	var need []string
	for _, p := range refused {
		need = append(need, fmt.Sprintf("key_prefix %q { policy = \"write\" }", p))
	}
	return &aclhint.Error{System: "Consul", Call: "a write under " + strings.Join(refused, ", "),
		Need: strings.Join(need, " and "), Policy: PlannerPolicy, Err: fmt.Errorf("%s", first)}
}
