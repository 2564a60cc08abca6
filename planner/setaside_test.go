package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/stack"
)

// No job can stop a round (docs/adversary.md, part 1): a job that Nomad
// cannot read, or whose planner records in Consul cannot be used, is set
// aside with status "unreadable" and the reason, alone; the rounds go on,
// the good job is granted, and the GPUs the set-aside job holds stay held.
// A driver's record that cannot be used is ignored.
func TestNoJobStopsARound(t *testing.T) {
	key := func(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }
	runner := key("runner")
	cases := []struct {
		name string
		// spoil breaks the runner (granted all 4 of the node's first GPUs
		// ... it holds 4 of 8) after it was granted.
		spoil func(h *harness)
		// aside: the runner is set aside with a reason naming this.
		aside string
	}{
		{"Nomad cannot read the job", func(h *harness) {
			h.fn.unreadable = map[core.JobKey]error{runner: errors.New("json: cannot unmarshal array into Go value of type api.Job")}
		}, "cannot unmarshal array"},
		{"its lease does not decode", func(h *harness) {
			h.fs.bad = []consul.BadKey{{Key: lease.JobKey("default", "runner"), Job: runner, Err: errors.New("does not decode: unexpected end of JSON input")}}
		}, lease.JobKey("default", "runner")},
		{"its record does not decode", func(h *harness) {
			h.fs.bad = []consul.BadKey{{Key: consul.RecordKey(runner), Job: runner, Err: errors.New(`does not decode: parsing time "yesterday"`)}}
		}, consul.RecordKey(runner)},
		{"its lease names another job", func(h *harness) {
			h.fs.bad = []consul.BadKey{{Key: lease.JobKey("default", "runner"), Job: runner, Err: errors.New("its value names job default/other, its key default/runner")}}
		}, "names job default/other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, stack.Of(core.FIFO{}))
			h.fn.submit("runner", 4, "be", "10s")
			h.round("runner granted")
			held := h.fs.leases[runner]
			if len(held.GPUs) != 4 {
				t.Fatalf("runner not granted: %+v", h.fs.statuses[runner])
			}
			tc.spoil(h)
			h.fn.submit("all", 8, "be", "10s") // needs the runner's GPUs
			h.fn.submit("small", 4, "be", "10s")
			h.fn.finish("runner") // the finish must not be acted on while set aside
			for i := range 3 {
				h.round("set aside " + itoa(i))
			}
			st := h.fs.statuses[runner]
			if st.State != StateUnreadable || !strings.Contains(st.Reason, tc.aside) {
				t.Fatalf("runner's status %s (%s), want unreadable naming %q", st.State, st.Reason, tc.aside)
			}
			if l, ok := h.fs.leases[runner]; !ok || l.LeaseID != held.LeaseID {
				t.Fatalf("the set-aside runner's lease was released or replaced: %+v", l)
			}
			if _, ok := h.fs.records[runner]; !ok {
				t.Fatal("the set-aside runner's record was deleted")
			}
			if _, ok := h.fs.leases[key("small")]; !ok {
				t.Fatalf("the job that fits beside it was not granted: %+v", h.fs.statuses[key("small")])
			}
			if l, ok := h.fs.leases[key("all")]; ok {
				t.Fatalf("GPUs the set-aside runner holds were granted: %v", l.GPUs)
			}
			if why := h.fs.statuses[key("all")].Reason; !strings.Contains(why, "held by jobs set aside as unreadable (default/runner)") {
				t.Errorf("the job waiting for its GPUs says %q, not that a set-aside job holds them", why)
			}
			// Readable again: its finish is acted on, and the GPUs go on.
			h.fn.unreadable, h.fs.bad = nil, nil
			h.finishSmall()
			for i := range 3 {
				h.round("readable again " + itoa(i))
			}
			if _, ok := h.fs.leases[runner]; ok {
				t.Fatal("the runner, finished and readable again, still holds its lease")
			}
			if _, ok := h.fs.leases[key("all")]; !ok {
				t.Fatalf("the 8-GPU job was not granted once the GPUs were free: %+v", h.fs.statuses[key("all")])
			}
		})
	}
}

// finishSmall ends the "small" job of TestNoJobStopsARound.
func (h *harness) finishSmall() { h.fn.finish("small") }

// A record a task driver writes (checkpoint, progress) that cannot be used
// is ignored: the job is decided as if the driver had written none, and
// nothing is set aside.
func TestDriverRecordThatCannotBeUsedIsIgnored(t *testing.T) {
	h := newHarness(t, 8, stack.Of(core.FIFO{}))
	k := core.JobKey{Namespace: "default", ID: "j"}
	h.fs.bad = []consul.BadKey{
		{Key: lease.ProgressKey("default", "j"), Job: k, Err: errors.New("does not decode")},
		{Key: lease.CheckpointKey("default", "j"), Job: k, Err: errors.New("its value names job default/x")},
	}
	h.fn.submit("j", 2, "be", "10s")
	h.round("first")
	if st := h.fs.statuses[k]; st.State != "granted" {
		t.Fatalf("status %s (%s), want granted", st.State, st.Reason)
	}
}
