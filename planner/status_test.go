package planner

import (
	"bytes"
	"context"
	"errors"
	"github.com/themis-nomad/themis/planner/plannertest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

func jobKey(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }

// putIDs are the jobs of the last WriteStatuses call's records.
func putIDs(fs *plannertest.Store) []string {
	var out []string
	for _, st := range fs.LastPuts {
		out = append(out, st.JobID)
	}
	return out
}

// A round's changed status records go to the store in one call, in key
// order, each with Since set to that round; a round that changes nothing
// writes nothing; a job gone from Nomad has its record deleted in the same
// call as the round's changes.
func TestStatusesWrittenTogetherOnlyWhenChanged(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	h.Nomad.Submit("b", 4, "be", "10s")
	h.Nomad.Submit("a", 4, "be", "10s")
	h.Nomad.Submit("c", 8, "be", "10s") // queued behind the two
	first := h.Clock
	h.Round("first")
	if h.Store.StatusCalls != 1 || !slices.Equal(putIDs(h.Store), []string{"a", "b", "c"}) || len(h.Store.LastDels) != 0 {
		t.Fatalf("first round: %d calls, last put %v del %v; want one call putting a, b, c", h.Store.StatusCalls, putIDs(h.Store), h.Store.LastDels)
	}
	for _, id := range []string{"a", "b", "c"} {
		if st := h.Store.JobStatuses[jobKey(id)]; !st.Since.Equal(first) || st.JobID != id || st.Namespace != "default" {
			t.Errorf("%s: %+v, want since %s", id, st, first)
		}
	}
	h.Round("nothing changed")
	if h.Store.StatusCalls != 1 {
		t.Fatalf("a round that changed nothing wrote statuses (%d calls, last %v)", h.Store.StatusCalls, putIDs(h.Store))
	}

	if st := h.Store.JobStatuses[jobKey("c")]; st.State != "queued" {
		t.Fatalf("c: %+v, want queued", st)
	}
	// c, held, is purged from Nomad while a finishes: one call puts a's
	// record and c's, purged (a held job's status is kept, never
	// finished: hold.go); b's, unchanged, keeps its Since.
	delete(h.Nomad.Jobs, jobKey("c"))
	h.Nomad.Finish("a")
	now := h.Clock
	h.Round("c purged, a finished")
	if h.Store.StatusCalls != 2 || !slices.Equal(putIDs(h.Store), []string{"a", "c"}) || len(h.Store.LastDels) != 0 {
		t.Fatalf("%d calls, last put %v del %v; want a second call putting a and c", h.Store.StatusCalls, putIDs(h.Store), h.Store.LastDels)
	}
	if st := h.Store.JobStatuses[jobKey("a")]; st.State != "finished" || !st.Since.Equal(now) {
		t.Errorf("a: %+v, want finished since %s", st, now)
	}
	if st := h.Store.JobStatuses[jobKey("c")]; st.State != StatePurged || !strings.Contains(st.Reason, "purged from Nomad while held") {
		t.Errorf("c: %+v, want purged", st)
	}
	// An operator deletes c's record: the planner has nothing of c
	// left, and c's status goes.
	delete(h.Store.JobRecords, jobKey("c"))
	h.Round("c's record gone")
	if _, ok := h.Store.JobStatuses[jobKey("c")]; ok {
		t.Error("c's status is still in the store")
	}
	if _, ok := h.P.statuses[jobKey("c")]; ok {
		t.Error("c's status is still in the planner's cache")
	}
	if st := h.Store.JobStatuses[jobKey("b")]; !st.Since.Equal(first) {
		t.Errorf("b rewritten: %+v", st)
	}
}

// A status write that fails leaves the planner's cache as it was for what
// Consul did not commit, so the next round writes it again; the round
// reports the error; a rejected job is logged once, when its record is
// written.
func TestFailedStatusWriteIsRetried(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	var logs bytes.Buffer
	h.config.Log = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Error})
	h.Restart()
	h.Nomad.Submit("a", 4, "be", "10s")
	h.Nomad.Submit("bad", 4, "be", "10s")
	h.Nomad.Jobs[jobKey("bad")].TaskGroups[0].Tasks[0].Config["themis"].([]any)[0].(map[string]any)["gpus"] = "two"
	h.Nomad.Submit("c", 2, "be", "10s")
	boom := errors.New("consul: transaction refused")

	// Nothing is committed: the store and the cache stay empty.
	h.Store.StatusFail = &plannertest.StatusFail{After: 0, Err: boom}
	if err := h.P.Reconcile(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("round with a failing status write: err = %v, want %v", err, boom)
	}
	if len(h.Store.JobStatuses) != 0 || len(h.P.statuses) != 0 {
		t.Fatalf("after a failed write: store %v, cache %v; want both empty", h.Store.JobStatuses, h.P.statuses)
	}
	if strings.Contains(logs.String(), "rejected a themis job") {
		t.Errorf("the rejection was logged though its record was not written: %s", logs.String())
	}

	// The first transaction commits, the next fails (a's record only:
	// one write of three): the cache takes a's, not bad's or c's.
	h.Clock = h.Clock.Add(time.Second)
	h.Store.StatusFail = &plannertest.StatusFail{After: 1, Err: boom}
	second := h.Clock
	if err := h.P.Reconcile(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("round with a partly failing write: err = %v", err)
	}
	if _, ok := h.P.statuses[jobKey("a")]; !ok || len(h.P.statuses) != 1 {
		t.Fatalf("cache after one of three writes: %v, want a's only", h.P.statuses)
	}

	// Consul is back: the next round writes what is still missing, and
	// only that.
	h.Clock = h.Clock.Add(time.Second)
	h.Store.StatusFail = nil
	third := h.Clock
	if err := h.P.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(putIDs(h.Store), []string{"bad", "c"}) {
		t.Fatalf("retry wrote %v, want bad and c", putIDs(h.Store))
	}
	want := map[string]struct {
		state string
		since time.Time
	}{"a": {"granted", second}, "bad": {"rejected", third}, "c": {"granted", third}}
	for id, w := range want {
		st, ok := h.Store.JobStatuses[jobKey(id)]
		if !ok || st.State != w.state || !st.Since.Equal(w.since) {
			t.Errorf("%s: %+v, want %s since %s", id, st, w.state, w.since)
		}
		if c := h.P.statuses[jobKey(id)]; c.State != st.State || !c.Since.Equal(st.Since) {
			t.Errorf("%s: cache %+v differs from the store's %+v", id, c, st)
		}
	}
	if n := strings.Count(logs.String(), "rejected a themis job"); n != 1 {
		t.Errorf("the rejection was logged %d times, want once: %s", n, logs.String())
	}
	if err := h.P.Reconcile(context.Background()); err != nil || h.Store.StatusCalls != 3 {
		t.Errorf("a round after the retry: err %v, %d calls (want 3: nothing left to write)", err, h.Store.StatusCalls)
	}
}
