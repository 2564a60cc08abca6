package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// withSidecar gives a submitted job's themis group a second task, log (a
// themis job has one group: planner/nomad/jobshape.go; the hold stops the
// whole group).
func withSidecar(j *api.Job) {
	j.TaskGroups[0].Tasks = append(j.TaskGroups[0].Tasks, &api.Task{Name: "log", Driver: "exec", Config: map[string]any{"command": "tail"}})
}

// A job the round leaves waiting is held: its record names the hold
// (version, counts) before Nomad has the job at count 0 in the pending
// pool, every group stopped; the next round tags the held version; rounds
// that change nothing write no tag; the pin gives every group its count
// back from the record, and the round after the pin removes the tag and
// the hold from the record, so the finished job is Nomad's to collect.
func TestHeldJobLifecycle(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	h.Nomad.Submit("a", 8, "be", "10s")
	h.Nomad.Submit("b", 4, "be", "10s")
	withSidecar(h.Nomad.Submitted("b"))
	kb := jobKey("b")
	h.Round("a granted, b held")
	jb := h.Nomad.Jobs[kb]
	rec := h.Store.JobRecords[kb]
	if rec.Held == nil || rec.Held.Version.Version != *jb.Version || rec.Held.Counts["g"] != 1 {
		t.Fatalf("b's record holds %+v; want the version Nomad has (%d) and count g=1", rec.Held, *jb.Version)
	}
	if *jb.NodePool != nomad.DefaultPendingPool || *jb.TaskGroups[0].Count != 0 || jb.Meta[nomad.HeldMeta] != rec.Held.ID {
		t.Fatalf("b in Nomad: pool %s, count %d, meta %v; want the pending pool, the group at 0, the hold named",
			*jb.NodePool, *jb.TaskGroups[0].Count, jb.Meta)
	}
	if h.Nomad.Holds != 1 {
		t.Fatalf("%d holds, want 1 (a was granted, never held)", h.Nomad.Holds)
	}
	h.Round("b tagged")
	desc, ok := h.Nomad.Tagged(kb)
	if !ok || !strings.HasPrefix(desc, "queued: held by the themis planner") || !strings.Contains(desc, "4 GPUs") {
		t.Fatalf("b's tag: %q (%v); want the held version tagged, queued, 4 GPUs", desc, ok)
	}
	if st := h.Store.JobStatuses[kb]; st.State != "queued" || st.Held != desc {
		t.Errorf("b's status %+v; want queued, held as tagged", st)
	}
	writes := h.Nomad.Index
	h.Round("nothing changed")
	if h.Nomad.Index != writes || h.Store.JobRecords[kb].Held == nil {
		t.Fatalf("a round that changed nothing wrote to Nomad (index %d -> %d)", writes, h.Nomad.Index)
	}
	if st := h.Store.JobStatuses[kb]; st.State != "queued" {
		t.Fatalf("b held: %+v, want queued (Nomad has it dead)", st)
	}

	h.Nomad.Finish("a")
	h.Round("a finished, b granted")
	jb = h.Nomad.Jobs[kb]
	if *jb.TaskGroups[0].Count != 1 || len(jb.TaskGroups[0].Tasks) != 2 || jb.Meta[nomad.HeldMeta] != "" {
		t.Fatalf("b pinned: count %d, %d tasks, meta %v; want 1, both tasks, no hold named", *jb.TaskGroups[0].Count, len(jb.TaskGroups[0].Tasks), jb.Meta)
	}
	h.Round("b's hold undone")
	if _, ok := h.Nomad.Tagged(kb); ok {
		t.Error("b runs, its held version still tagged: Nomad would never collect it")
	}
	if rec := h.Store.JobRecords[kb]; rec.Held != nil {
		t.Errorf("b runs, its record still holds %+v", rec.Held)
	}
	h.Nomad.Finish("b")
	h.Round("b finished")
	if st := h.Store.JobStatuses[kb]; st.State != StateFinished {
		t.Errorf("b: %+v, want finished", st)
	}
}

// A suspended job is held by its suspension: the release records it as
// the job's hold and the job is tagged until it resumes.
func TestSuspendedJobIsHeldAndTagged(t *testing.T) {
	h := newHarness(t, 4, mustStack(t, "fitgpp", stack.Options{}))
	h.Nomad.Submit("be", 4, "be", "2s")
	h.Round("be granted")
	h.Nomad.Submit("te", 4, "te", "2s")
	kb := jobKey("be")
	for i := 0; i < 8; i++ {
		h.Round("be preempted for te")
	}
	if st := h.Store.JobStatuses[kb]; st.State != "suspended" {
		t.Fatalf("be: %+v, want suspended", st)
	}
	rec := h.Store.JobRecords[kb]
	if rec.Held == nil || rec.Held.Reason == lease.HoldQueued || rec.Suspended == nil || rec.Held.Version != *rec.Suspended {
		t.Fatalf("be's record: held %+v suspended %v; want its suspension as its hold", rec.Held, rec.Suspended)
	}
	if desc, ok := h.Nomad.Tagged(kb); !ok || !strings.HasPrefix(desc, "suspended: preempted by") {
		t.Fatalf("be's tag %q (%v), want suspended: preempted by ...", desc, ok)
	}
}

// A held job purged from Nomad (an operator's `nomad job stop -purge`, a
// garbage collection) is never reported finished: its status says it was
// purged while held, and its record stays.
func TestHeldJobPurgedIsReportedNotFinished(t *testing.T) {
	h := newHarness(t, 4, stack.Of(policies.FIFO{}))
	h.Nomad.Submit("a", 4, "be", "10s")
	h.Nomad.Submit("b", 4, "be", "10s")
	h.Round("b held")
	h.Round("b tagged")
	kb := jobKey("b")
	delete(h.Nomad.Jobs, kb)
	h.Round("b purged")
	st := h.Store.JobStatuses[kb]
	if st.State != StatePurged || !strings.Contains(st.Reason, "purged from Nomad while held (queued since") {
		t.Fatalf("b: %+v, want purged while held", st)
	}
	if rec, ok := h.Store.JobRecords[kb]; !ok || rec.Held == nil {
		t.Fatalf("b's record dropped (%v): the planner forgot a job it held", ok)
	}
	h.Round("again")
	if st := h.Store.JobStatuses[kb]; st.State != StatePurged {
		t.Fatalf("b: %+v, want still purged", st)
	}
}

// The planner trusts only its record of a hold (docs/adversary.md): a
// version of a held job its user registered is not held, whatever meta
// or tag it carries.
func TestHeldVersionForgeries(t *testing.T) {
	cases := []struct {
		name   string
		change func(j *api.Job)
		// state and reason are b's status after.
		state, reason string
	}{{
		name:   "copy of the held version at count 1 (nomad job inspect, run): its planner meta rejected",
		change: func(j *api.Job) { j.TaskGroups[0].Count = ptr(1); j.Status = ptr("pending") },
		state:  "rejected", reason: `meta "themis.held"`,
	}, {
		name: "the user's own version at count 0, the hold's meta and a themis-held tag forged: the user's, finished",
		change: func(j *api.Job) {
			j.Status = ptr("dead")
			j.VersionTag = &api.JobVersionTag{Name: nomad.HeldTag, Description: "queued: forged"}
		},
		state: StateFinished,
	}, {
		name: "forged suspension meta at count 0: the user's, finished",
		change: func(j *api.Job) {
			j.Meta[nomad.SuspendedMeta] = "lease-x"
			j.Meta[nomad.CountMeta] = "4"
			j.Status = ptr("dead")
		},
		state: StateFinished,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := withBHeldAndTagged(t)
			h.Nomad.Reregister("b", tc.change)
			h.Round("b forged")
			h.Round("after")
			kb := jobKey("b")
			st := h.Store.JobStatuses[kb]
			if st.State != tc.state || !strings.Contains(st.Reason, tc.reason) {
				t.Fatalf("b: %+v, want %s (%q)", st, tc.state, tc.reason)
			}
			if got := h.Nomad.RunningIDs(); len(got) != 1 || got[0] != "a" {
				t.Errorf("running %v, want a alone: nothing granted on a forgery", got)
			}
			if _, ok := h.Nomad.Tagged(kb); ok && tc.state == StateFinished {
				t.Errorf("b finished, its held version still tagged: Nomad would never collect it")
			}
			if _, ok := h.Store.JobRecords[kb]; ok && tc.state == StateFinished {
				t.Errorf("b finished, its record kept")
			}
		})
	}
}

// What its user does to a held job: a stop finishes it (its tag removed
// and its record dropped, so Nomad collects it as any other); a new
// version at count 1 is a new submission, held anew (one tag, on the new
// held version).
func TestHeldJobChangedByItsUser(t *testing.T) {
	cases := []struct {
		name   string
		change func(j *api.Job)
		check  func(t *testing.T, h *harness)
	}{{
		name:   "nomad job stop",
		change: func(j *api.Job) { j.Stop = ptr(true); j.Status = ptr("dead") },
		check: func(t *testing.T, h *harness) {
			kb := jobKey("b")
			if st := h.Store.JobStatuses[kb]; st.State != StateFinished {
				t.Errorf("b: %+v, want finished", st)
			}
			if _, ok := h.Nomad.Tagged(kb); ok {
				t.Error("b stopped, still tagged: Nomad would never collect it")
			}
			if _, ok := h.Store.JobRecords[kb]; ok {
				t.Error("b stopped, its record kept")
			}
		},
	}, {
		name: "resubmitted at count 1",
		change: func(j *api.Job) {
			j.TaskGroups[0].Count = ptr(1)
			delete(j.Meta, nomad.HeldMeta)
			j.Status = ptr("pending")
		},
		check: func(t *testing.T, h *harness) {
			kb := jobKey("b")
			jb := h.Nomad.Jobs[kb]
			rec := h.Store.JobRecords[kb]
			if h.Nomad.Holds != 2 || rec.Held == nil || rec.Held.Version.Version != *jb.Version || *jb.TaskGroups[0].Count != 0 {
				t.Fatalf("b: %d holds, record %+v, Nomad version %d count %d; want held anew at its new version",
					h.Nomad.Holds, rec.Held, *jb.Version, *jb.TaskGroups[0].Count)
			}
			if tag, ok := h.Nomad.Tags[kb][nomad.HeldTag]; !ok || tag.Version != *jb.Version {
				t.Errorf("b's tag %+v (%v), want it on the new held version %d", tag, ok, *jb.Version)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := withBHeldAndTagged(t)
			h.Nomad.Reregister("b", tc.change)
			for range 3 {
				h.Round("after the change")
			}
			tc.check(t, h)
		})
	}
}

// Many jobs submitted at once are held over several rounds, each with at
// most maxHoldWrites Nomad writes of holds and tags, so that no round runs
// past its timeout; every job ends held and tagged.
func TestManyHeldOverRounds(t *testing.T) {
	h := newHarness(t, 4, stack.Of(policies.FIFO{}))
	h.Nomad.Submit("a", 4, "be", "10s")
	n := maxHoldWrites + maxHoldWrites/2
	for i := range n {
		h.Nomad.Submit(fmt.Sprintf("q%04d", i), 4, "be", "10s")
	}
	h.Round("first")
	if h.Nomad.Holds != maxHoldWrites {
		t.Fatalf("%d holds in the first round, want %d (maxHoldWrites)", h.Nomad.Holds, maxHoldWrites)
	}
	for range 8 {
		h.Round("more")
	}
	tagged := 0
	for i := range n {
		if _, ok := h.Nomad.Tagged(jobKey(fmt.Sprintf("q%04d", i))); ok {
			tagged++
		}
	}
	if h.Nomad.Holds != n || tagged != n {
		t.Errorf("%d holds, %d tagged, want %d of each", h.Nomad.Holds, tagged, n)
	}
}

// withBHeldAndTagged is a 4-GPU cluster running a and holding b (4 GPUs
// each, fifo), b's held version tagged.
func withBHeldAndTagged(t *testing.T) *harness {
	h := newHarness(t, 4, stack.Of(policies.FIFO{}))
	h.Nomad.Submit("a", 4, "be", "10s")
	h.Nomad.Submit("b", 4, "be", "10s")
	h.Round("b held")
	h.Round("b tagged")
	return h
}
