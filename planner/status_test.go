package planner

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/stack"
)

func jobKey(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }

// putIDs are the jobs of the last WriteStatuses call's records.
func putIDs(fs *fakeStore) []string {
	var out []string
	for _, st := range fs.lastPuts {
		out = append(out, st.JobID)
	}
	return out
}

// A round's changed status records go to the store in one call, in key
// order, each with Since set to that round; a round that changes nothing
// writes nothing; a job gone from Nomad has its record deleted in the same
// call as the round's changes.
func TestStatusesWrittenTogetherOnlyWhenChanged(t *testing.T) {
	h := newHarness(t, 8, stack.Of(core.FIFO{}))
	h.fn.submit("b", 4, "be", "10s")
	h.fn.submit("a", 4, "be", "10s")
	h.fn.submit("c", 8, "be", "10s") // queued behind the two
	first := h.clock
	h.round("first")
	if h.fs.statusCalls != 1 || !slices.Equal(putIDs(h.fs), []string{"a", "b", "c"}) || len(h.fs.lastDels) != 0 {
		t.Fatalf("first round: %d calls, last put %v del %v; want one call putting a, b, c", h.fs.statusCalls, putIDs(h.fs), h.fs.lastDels)
	}
	for _, id := range []string{"a", "b", "c"} {
		if st := h.fs.statuses[jobKey(id)]; !st.Since.Equal(first) || st.JobID != id || st.Namespace != "default" {
			t.Errorf("%s: %+v, want since %s", id, st, first)
		}
	}
	h.round("nothing changed")
	if h.fs.statusCalls != 1 {
		t.Fatalf("a round that changed nothing wrote statuses (%d calls, last %v)", h.fs.statusCalls, putIDs(h.fs))
	}

	if st := h.fs.statuses[jobKey("c")]; st.State != "queued" {
		t.Fatalf("c: %+v, want queued", st)
	}
	// c leaves Nomad (purged) while a finishes: one call puts a's record
	// and deletes c's; b's, unchanged, keeps its Since.
	delete(h.fn.jobs, jobKey("c"))
	h.fn.finish("a")
	now := h.clock
	h.round("c gone, a finished")
	if h.fs.statusCalls != 2 || !slices.Equal(putIDs(h.fs), []string{"a"}) || !slices.Equal(h.fs.lastDels, []core.JobKey{jobKey("c")}) {
		t.Fatalf("%d calls, last put %v del %v; want a second call putting a and deleting c", h.fs.statusCalls, putIDs(h.fs), h.fs.lastDels)
	}
	if st := h.fs.statuses[jobKey("a")]; st.State != "finished" || !st.Since.Equal(now) {
		t.Errorf("a: %+v, want finished since %s", st, now)
	}
	if _, ok := h.fs.statuses[jobKey("c")]; ok {
		t.Error("c's record is still in the store")
	}
	if _, ok := h.p.statuses[jobKey("c")]; ok {
		t.Error("c's record is still in the planner's cache")
	}
	if st := h.fs.statuses[jobKey("b")]; !st.Since.Equal(first) {
		t.Errorf("b rewritten: %+v", st)
	}
}

// A status write that fails leaves the planner's cache as it was for what
// Consul did not commit, so the next round writes it again; the round
// reports the error; a rejected job is logged once, when its record is
// written.
func TestFailedStatusWriteIsRetried(t *testing.T) {
	h := newHarness(t, 8, stack.Of(core.FIFO{}))
	var logs bytes.Buffer
	h.config.Log = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Error})
	h.restart()
	h.fn.submit("a", 4, "be", "10s")
	h.fn.submit("bad", 4, "be", "10s")
	h.fn.jobs[jobKey("bad")].TaskGroups[0].Tasks[0].Config["themis"].([]any)[0].(map[string]any)["gpus"] = "two"
	h.fn.submit("c", 2, "be", "10s")
	boom := errors.New("consul: transaction refused")

	// Nothing is committed: the store and the cache stay empty.
	h.fs.statusFail = &statusFail{after: 0, err: boom}
	if err := h.p.Reconcile(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("round with a failing status write: err = %v, want %v", err, boom)
	}
	if len(h.fs.statuses) != 0 || len(h.p.statuses) != 0 {
		t.Fatalf("after a failed write: store %v, cache %v; want both empty", h.fs.statuses, h.p.statuses)
	}
	if strings.Contains(logs.String(), "rejected a themis job") {
		t.Errorf("the rejection was logged though its record was not written: %s", logs.String())
	}

	// The first transaction commits, the next fails (a's record only:
	// one write of three): the cache takes a's, not bad's or c's.
	h.clock = h.clock.Add(time.Second)
	h.fs.statusFail = &statusFail{after: 1, err: boom}
	second := h.clock
	if err := h.p.Reconcile(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("round with a partly failing write: err = %v", err)
	}
	if _, ok := h.p.statuses[jobKey("a")]; !ok || len(h.p.statuses) != 1 {
		t.Fatalf("cache after one of three writes: %v, want a's only", h.p.statuses)
	}

	// Consul is back: the next round writes what is still missing, and
	// only that.
	h.clock = h.clock.Add(time.Second)
	h.fs.statusFail = nil
	third := h.clock
	if err := h.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(putIDs(h.fs), []string{"bad", "c"}) {
		t.Fatalf("retry wrote %v, want bad and c", putIDs(h.fs))
	}
	want := map[string]struct {
		state string
		since time.Time
	}{"a": {"granted", second}, "bad": {"rejected", third}, "c": {"granted", third}}
	for id, w := range want {
		st, ok := h.fs.statuses[jobKey(id)]
		if !ok || st.State != w.state || !st.Since.Equal(w.since) {
			t.Errorf("%s: %+v, want %s since %s", id, st, w.state, w.since)
		}
		if c := h.p.statuses[jobKey(id)]; c.State != st.State || !c.Since.Equal(st.Since) {
			t.Errorf("%s: cache %+v differs from the store's %+v", id, c, st)
		}
	}
	if n := strings.Count(logs.String(), "rejected a themis job"); n != 1 {
		t.Errorf("the rejection was logged %d times, want once: %s", n, logs.String())
	}
	if err := h.p.Reconcile(context.Background()); err != nil || h.fs.statusCalls != 3 {
		t.Errorf("a round after the retry: err %v, %d calls (want 3: nothing left to write)", err, h.fs.statusCalls)
	}
}
