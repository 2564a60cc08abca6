package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/policies"
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
			h.Nomad.Unreadable = map[core.JobKey]error{runner: errors.New("json: cannot unmarshal array into Go value of type api.Job")}
		}, "cannot unmarshal array"},
		{"its lease does not decode", func(h *harness) {
			h.Store.Bad = []consul.BadKey{{Key: lease.JobKey("default", "runner"), Job: runner, Err: errors.New("does not decode: unexpected end of JSON input")}}
		}, lease.JobKey("default", "runner")},
		{"its record does not decode", func(h *harness) {
			h.Store.Bad = []consul.BadKey{{Key: lease.RecordKey(runner), Job: runner, Err: errors.New(`does not decode: parsing time "yesterday"`)}}
		}, lease.RecordKey(runner)},
		{"its lease names another job", func(h *harness) {
			h.Store.Bad = []consul.BadKey{{Key: lease.JobKey("default", "runner"), Job: runner, Err: errors.New("its value names job default/other, its key default/runner")}}
		}, "names job default/other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, stack.Of(policies.FIFO{}))
			h.Nomad.Submit("runner", 4, "be", "10s")
			h.Round("runner granted")
			held := h.Store.JobLeases[runner]
			if len(held.GPUs) != 4 {
				t.Fatalf("runner not granted: %+v", h.Store.JobStatuses[runner])
			}
			tc.spoil(h)
			h.Nomad.Submit("all", 8, "be", "10s") // needs the runner's GPUs
			h.Nomad.Submit("small", 4, "be", "10s")
			h.Nomad.Finish("runner") // the finish must not be acted on while set aside
			for i := range 3 {
				h.Round("set aside " + itoa(i))
			}
			st := h.Store.JobStatuses[runner]
			if st.State != StateUnreadable || !strings.Contains(st.Reason, tc.aside) {
				t.Fatalf("runner's status %s (%s), want unreadable naming %q", st.State, st.Reason, tc.aside)
			}
			if l, ok := h.Store.JobLeases[runner]; !ok || l.LeaseID != held.LeaseID {
				t.Fatalf("the set-aside runner's lease was released or replaced: %+v", l)
			}
			if _, ok := h.Store.JobRecords[runner]; !ok {
				t.Fatal("the set-aside runner's record was deleted")
			}
			if _, ok := h.Store.JobLeases[key("small")]; !ok {
				t.Fatalf("the job that fits beside it was not granted: %+v", h.Store.JobStatuses[key("small")])
			}
			if l, ok := h.Store.JobLeases[key("all")]; ok {
				t.Fatalf("GPUs the set-aside runner holds were granted: %v", l.GPUs)
			}
			if why := h.Store.JobStatuses[key("all")].Reason; !strings.Contains(why, "held by jobs set aside as unreadable (default/runner)") {
				t.Errorf("the job waiting for its GPUs says %q, not that a set-aside job holds them", why)
			}
			// Readable again: its finish is acted on, and the GPUs go on.
			h.Nomad.Unreadable, h.Store.Bad = nil, nil
			h.finishSmall()
			for i := range 3 {
				h.Round("readable again " + itoa(i))
			}
			if _, ok := h.Store.JobLeases[runner]; ok {
				t.Fatal("the runner, finished and readable again, still holds its lease")
			}
			if _, ok := h.Store.JobLeases[key("all")]; !ok {
				t.Fatalf("the 8-GPU job was not granted once the GPUs were free: %+v", h.Store.JobStatuses[key("all")])
			}
		})
	}
}

// finishSmall ends the "small" job of TestNoJobStopsARound.
func (h *harness) finishSmall() { h.Nomad.Finish("small") }

// A record a task driver writes (checkpoint, progress) that cannot be used
// is ignored: the job is decided as if the driver had written none, and
// nothing is set aside.
func TestDriverRecordThatCannotBeUsedIsIgnored(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	k := core.JobKey{Namespace: "default", ID: "j"}
	h.Store.Bad = []consul.BadKey{
		{Key: lease.ProgressKey("default", "j"), Job: k, Err: errors.New("does not decode")},
		{Key: lease.CheckpointKey("default", "j"), Job: k, Err: errors.New("its value names job default/x")},
	}
	h.Nomad.Submit("j", 2, "be", "10s")
	h.Round("first")
	if st := h.Store.JobStatuses[k]; st.State != "granted" {
		t.Fatalf("status %s (%s), want granted", st.State, st.Reason)
	}
}
