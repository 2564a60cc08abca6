package planner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/plannertest"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// refusingStore refuses, alone, the status write of the job refuse names,
// as consul.Store does one Consul cannot take; every other is written.
type refusingStore struct {
	*plannertest.Store
	refuse string
	sent   [][]string
}

func (s *refusingStore) WriteStatuses(ctx context.Context, puts []lease.JobStatus, dels []core.JobKey) (int, error) {
	var ids []string
	var keep []lease.JobStatus
	var refused []consul.RefusedWrite
	for i, st := range puts {
		ids = append(ids, st.JobID)
		if st.JobID == s.refuse {
			refused = append(refused, consul.RefusedWrite{Index: i, Key: st.JobID, Err: errors.New("too large")})
			continue
		}
		keep = append(keep, st)
	}
	s.sent = append(s.sent, ids)
	if _, err := s.Store.WriteStatuses(ctx, keep, dels); err != nil {
		return 0, err
	}
	if len(refused) > 0 {
		return len(puts) + len(dels), &consul.RefusedError{Writes: refused}
	}
	return len(puts) + len(dels), nil
}

// A status's reason quotes what a user wrote (here a 400 KB app name in
// the stanza): the record holds at most lease.MaxReasonBytes of it. One
// status the store refuses alone fails no round and stops no other job's;
// it is not sent again until it changes.
func TestStatusesBoundedAndRefusedAlone(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	rs := &refusingStore{Store: h.Store, refuse: "wedge"}
	h.config.Store = rs
	h.Restart()
	h.Nomad.Submit("a", 4, "be", "10s")
	h.Nomad.Submit("long", 4, "be", "10s")
	h.Nomad.Jobs[jobKey("long")].TaskGroups[0].Tasks[0].Config["themis"].([]any)[0].(map[string]any)["app"] = strings.Repeat("x", 400<<10)
	h.Nomad.Submit("wedge", 2, "be", "10s")
	h.Nomad.Submit("z", 2, "be", "10s")
	if err := h.P.Reconcile(context.Background()); err != nil {
		t.Fatalf("a round with one refused status: %v", err)
	}
	st := h.Store.JobStatuses[jobKey("long")]
	if st.State != "rejected" || len(st.Reason) > lease.MaxReasonBytes || !strings.Contains(st.Reason, "themis.app") {
		t.Errorf("long's status: %s, %d bytes of reason, want rejected with at most %d", st.State, len(st.Reason), lease.MaxReasonBytes)
	}
	for _, id := range []string{"a", "z"} {
		if _, ok := h.Store.JobStatuses[jobKey(id)]; !ok {
			t.Errorf("%s's status not written", id)
		}
	}
	if err := h.P.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rs.sent); n > 1 && slices.Contains(rs.sent[n-1], "wedge") {
		t.Errorf("the refused status was sent again unchanged: %v", rs.sent)
	}
}
