package planner

import (
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// An upgrade across #34's rename of the lease meta key: a job pinned by an
// older planner names its lease under themis.lease only. The new planner
// takes that version as its pin (no revoke, no resubmission) round after
// round; its next suspension drops the old key, and its next pin writes
// themis.lease_id alone.
func TestOldLeaseMetaKeyStillPinned(t *testing.T) {
	policy, err := policies.NewFitGpp(core.Knobs{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, 8, stack.Of(policy))
	k := core.JobKey{Namespace: "default", ID: "be"}
	h.Nomad.Submit("be", 8, "be", "10s")
	h.Round("be granted")
	first := h.Store.JobLeases[k]
	j := h.Nomad.Jobs[k]
	if first.LeaseID == "" || first.Pinned == nil || j.Meta[nomad.LeaseMeta] != first.LeaseID {
		t.Fatalf("be was not granted and pinned: lease %+v, meta %v", first, j.Meta)
	}
	if _, old := j.Meta[nomad.OldLeaseMeta]; old {
		t.Fatalf("the pin wrote the old key: meta %v", j.Meta)
	}
	// The pinned version as an older planner wrote it: the same version,
	// the lease ID under the old key.
	delete(j.Meta, nomad.LeaseMeta)
	j.Meta[nomad.OldLeaseMeta] = first.LeaseID
	version, state := *j.Version, h.Store.JobStatuses[k].State
	for i := range 4 {
		h.Clock = h.Clock.Add(5 * time.Second)
		h.Round("old key " + itoa(i))
		l := h.Store.JobLeases[k]
		if l.LeaseID != first.LeaseID || l.Revoke != nil || h.Nomad.Suspensions != 0 || *h.Nomad.Jobs[k].Version != version {
			t.Fatalf("round %d: the old planner's pin is not taken as pinned: lease %+v, %d suspensions, version %d (was %d), status %+v",
				i, l, h.Nomad.Suspensions, *h.Nomad.Jobs[k].Version, version, h.Store.JobStatuses[k])
		}
		if st := h.Store.JobStatuses[k]; st.State != state {
			t.Fatalf("round %d: status %+v, want %s as before", i, st, state)
		}
	}
	// A TE job preempts be: the suspension drops the old key.
	h.Nomad.Submit("te", 2, "te", "10s")
	for i := range 6 {
		h.Round("te preempts be " + itoa(i))
	}
	j = h.Nomad.Jobs[k]
	if h.Nomad.Suspensions != 1 || j.Meta[nomad.SuspendedMeta] != first.LeaseID {
		t.Fatalf("be was not suspended: %d suspensions, meta %v", h.Nomad.Suspensions, j.Meta)
	}
	if r := h.Store.JobRecords[k]; r.Preemptions != 1 {
		t.Errorf("record %+v: want one preemption, not a resubmission", r)
	}
	_, old := j.Meta[nomad.OldLeaseMeta]
	_, cur := j.Meta[nomad.LeaseMeta]
	if old || cur {
		t.Fatalf("the suspension left a lease key: meta %v", j.Meta)
	}
	// te done, be pinned again: the new key only.
	h.Nomad.Finish("te")
	for i := range 6 {
		h.Round("be again " + itoa(i))
	}
	l, j := h.Store.JobLeases[k], h.Nomad.Jobs[k]
	if l.LeaseID == "" || l.LeaseID == first.LeaseID || j.Meta[nomad.LeaseMeta] != l.LeaseID {
		t.Fatalf("be was not pinned again: lease %+v, meta %v, status %+v", l, j.Meta, h.Store.JobStatuses[k])
	}
	if _, old := j.Meta[nomad.OldLeaseMeta]; old {
		t.Fatalf("the new pin kept the old key: meta %v", j.Meta)
	}
}
