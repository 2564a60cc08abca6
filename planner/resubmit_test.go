package planner

import (
	"testing"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// A user resubmits a running job (a new version, unpinned, in the pending
// pool): Nomad keeps the old allocation running, so its lease is taken back
// like a preemption (the old version checkpoints and stops) before the new
// version is granted; no task runs without its lease meanwhile, and the
// resubmission is not counted as a preemption.
func TestResubmittedRunningJobStopsBeforeItsLeaseGoes(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	fn, fs, round := h.Nomad, h.Store, h.Round
	k := core.JobKey{Namespace: "default", ID: "train"}
	fn.Submit("train", 4, "be", "10s")
	round("granted")
	first := fs.JobLeases[k].LeaseID
	if first == "" || len(fn.Running("train")) != 1 {
		t.Fatal("train does not run")
	}
	// The user's `nomad job run` again: a new version without the pin.
	fn.Index++
	j := fn.Jobs[k]
	j.JobModifyIndex, j.NodePool = ptr(fn.Index), ptr(nomad.DefaultPendingPool)
	delete(j.Meta, nomad.LeaseMeta)
	for i := range 6 {
		round("after the resubmission " + itoa(i))
	}
	l, ok := fs.JobLeases[k]
	if !ok || l.LeaseID == first || l.Revoke != nil {
		t.Fatalf("want the new version granted under a new lease; lease %+v", l)
	}
	if n := len(fn.Running("train")); n != 1 {
		t.Fatalf("%d running allocations, want 1 (the new version's)", n)
	}
	if fn.Suspensions != 1 {
		t.Errorf("suspended %d times, want 1", fn.Suspensions)
	}
	if r := fs.JobRecords[k]; r.Preemptions != 0 || r.Executed <= 0 {
		t.Errorf("record %+v: want the old version's service and no preemption", r)
	}
	// Once it finishes, `themis status` says so, and its record goes.
	fn.Finish("train")
	round("finished")
	if st := fs.JobStatuses[k]; st.State != "finished" {
		t.Errorf("status of the finished job: %+v, want finished", st)
	}
	if _, ok := fs.JobRecords[k]; ok {
		t.Error("the finished job's record is still there")
	}
}
