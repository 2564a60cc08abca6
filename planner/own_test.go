package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// The planner trusts only what it wrote (docs/adversary.md, part 3): a job's
// lease, suspension, count, gang and restart state come from the planner's
// records in Consul, checked against the job version the planner itself
// registered. A pinned job that its user re-registers with the planner's
// meta kept, whatever else changed, is a new submission: its lease is taken
// back through the revoke path (the running version checkpoints and
// stops), not counted as a preemption, and the job is granted again under
// a new lease, pinned by the planner.
func TestForgedLeaseMetaIsANewSubmission(t *testing.T) {
	cases := []struct {
		name   string
		change func(j *api.Job)
	}{
		{"devices: 4 GPUs, the pin's constraint dropped", func(j *api.Job) {
			j.TaskGroups[0].Tasks[0].Resources = &api.Resources{Devices: []*api.RequestedDevice{device("themis/gpu", 4)}}
		}},
		{"the node constraint dropped", func(j *api.Job) { j.TaskGroups[0].Constraints = nil }},
		{"restart count forged", func(j *api.Job) { j.Meta[nomad.RestartCountMeta] = "99" }},
		{"gang forged: count 3", func(j *api.Job) { j.TaskGroups[0].Count, j.Meta[nomad.GangMeta] = ptr(3), "3" }},
		{"nothing but the version", func(j *api.Job) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, stack.Of(policies.FIFO{}))
			k := core.JobKey{Namespace: "default", ID: "train"}
			h.Nomad.Submit("train", 2, "be", "10s")
			h.Round("granted")
			first := h.Store.JobLeases[k]
			if first.LeaseID == "" || h.Nomad.Jobs[k].Meta[nomad.LeaseMeta] != first.LeaseID {
				t.Fatalf("train was not granted and pinned: %+v", h.Store.JobStatuses[k])
			}
			h.Nomad.Reregister("train", tc.change)
			h.Round("the forged version")
			if l := h.Store.JobLeases[k]; l.LeaseID == first.LeaseID && l.Revoke == nil {
				t.Fatalf("the forged version is taken as pinned under lease %s (status %+v)", l.LeaseID, h.Store.JobStatuses[k])
			}
			for i := range 6 {
				h.Round("after the forged version " + itoa(i))
			}
			l, ok := h.Store.JobLeases[k]
			if !ok || l.LeaseID == first.LeaseID || l.Revoke != nil {
				t.Fatalf("want train granted again under a new lease; lease %+v, status %+v", l, h.Store.JobStatuses[k])
			}
			if h.Nomad.Suspensions != 1 {
				t.Errorf("suspended %d times, want 1 (the old lease taken back through the revoke path)", h.Nomad.Suspensions)
			}
			if r := h.Store.JobRecords[k]; r.Preemptions != 0 {
				t.Errorf("record %+v: a resubmission is not a preemption", r)
			}
			j := h.Nomad.Jobs[k]
			if j.Meta[nomad.LeaseMeta] != l.LeaseID || j.Meta[nomad.RestartCountMeta] != "0" || *j.TaskGroups[0].Count != 1 {
				t.Errorf("the job is not the planner's pin of lease %s: meta %v, count %d", l.LeaseID, j.Meta, *j.TaskGroups[0].Count)
			}
		})
	}
}

// A job whose lease is being taken back, re-registered by its user with
// the suspension the planner would write forged (themis.suspended naming
// the lease, count 1, still pinned): the planner suspends it all the same,
// so the running version stops and the lease ends.
func TestForgedSuspensionDuringARevoke(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	k := core.JobKey{Namespace: "default", ID: "train"}
	h.Nomad.Submit("train", 2, "be", "10s")
	h.Round("granted")
	first := h.Store.JobLeases[k].LeaseID
	h.Nomad.Reregister("train", func(j *api.Job) {
		delete(j.Meta, nomad.LeaseMeta)
		j.Meta[nomad.SuspendedMeta], j.Meta[nomad.CountMeta] = first, "1"
	})
	for i := range 6 {
		h.Round("after the forged suspension " + itoa(i))
	}
	if h.Nomad.Suspensions != 1 {
		t.Fatalf("suspended %d times, want 1: the forged suspension kept the job running (lease %+v)", h.Nomad.Suspensions, h.Store.JobLeases[k])
	}
	if l, ok := h.Store.JobLeases[k]; !ok || l.LeaseID == first || l.Revoke != nil {
		t.Fatalf("want train granted again under a new lease; lease %+v, status %+v", l, h.Store.JobStatuses[k])
	}
}

// A suspended job (preempted: its lease taken back and released) that its
// user re-registers with the planner's suspension copied (themis.suspended
// naming the lease the planner took back) but count 1, straight into a GPU
// pool: not the planner's suspension, so it is rejected naming the key and
// moved to the pending pool, where Nomad cannot place it.
func TestForgedSuspensionOfAWaitingJob(t *testing.T) {
	policy, err := policies.NewFitGpp(core.Knobs{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, 8, stack.Of(policy))
	k := core.JobKey{Namespace: "default", ID: "be"}
	h.Nomad.Submit("be", 8, "be", "10s")
	h.Round("be granted")
	first := h.Store.JobLeases[k].LeaseID
	h.Clock = h.Clock.Add(30 * time.Second)
	h.Nomad.Submit("te", 2, "te", "10s")
	for i := range 6 {
		h.Round("te preempts be " + itoa(i))
	}
	if rec := h.Store.JobRecords[k]; rec.LastLease != first || h.Nomad.Jobs[k].Meta[nomad.SuspendedMeta] != first || h.Store.JobStatuses[k].State != "suspended" {
		t.Fatalf("be was not suspended by the planner: record %+v, meta %v, status %+v", rec, h.Nomad.Jobs[k].Meta, h.Store.JobStatuses[k])
	}
	h.Nomad.Reregister("be", func(j *api.Job) { j.TaskGroups[0].Count, j.NodePool = ptr(1), ptr("default") })
	h.Round("the forged suspension")
	h.Round("after it")
	st := h.Store.JobStatuses[k]
	if st.State != "rejected" || !strings.Contains(st.Reason, `meta "themis.suspended"`) {
		t.Errorf("status %s (%s), want rejected naming meta \"themis.suspended\"", st.State, st.Reason)
	}
	if pool := *h.Nomad.Jobs[k].NodePool; pool != nomad.DefaultPendingPool {
		t.Errorf("the forged job stays in node pool %q, where Nomad places it without a lease", pool)
	}
}

// What the planner's records say of a job version (own.go), case by case:
// only a version the planner's records name counts as its pin or its
// suspension, and only with the meta and count it wrote; records written
// before planners recorded versions fall back to the meta once (a lease)
// or for a count of 0, which runs nothing (a suspension).
func TestOwnVersion(t *testing.T) {
	const L = "lease-1"
	v := func(n uint64) *lease.JobVersion { return &lease.JobVersion{CreateIndex: 5, Version: n} }
	job := func(version uint64, count int, status string, meta map[string]string) *nomad.Job {
		j := &api.Job{ID: ptr("j"), Namespace: ptr("default"), Status: ptr(status), CreateIndex: ptr(uint64(5)), Version: ptr(version),
			JobModifyIndex: ptr(100 + version), Meta: meta,
			TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Count: ptr(count), Tasks: []*api.Task{{Name: "t", Driver: nomad.DriverName,
				Config: map[string]any{"themis": []any{map[string]any{"gpus": 1.0}}}}}}}}
		pj, err := nomad.ParseJob(j)
		if err != nil {
			t.Fatal(err)
		}
		return pj
	}
	pinnedLease := lease.JobLease{LeaseID: L, Namespace: "default", JobID: "j", SubmitIndex: 101, Pinned: v(2)}
	revoking := pinnedLease
	revoking.Revoke = &lease.Revoke{Suspends: v(3)}
	legacy := pinnedLease
	legacy.Pinned = nil
	legacyRevoking := legacy
	legacyRevoking.Revoke = &lease.Revoke{}
	susp := map[string]string{nomad.SuspendedMeta: L}
	cases := []struct {
		name     string
		j        *nomad.Job
		l        *lease.JobLease
		rec      *lease.JobRecord
		want     ownVersion
		finished bool
	}{
		{"the pin's version", job(2, 1, "running", map[string]string{nomad.LeaseMeta: L}), &pinnedLease, nil, ownVersion{pinned: true}, false},
		{"the pin's version, the lease under the old key", job(2, 1, "running", map[string]string{nomad.OldLeaseMeta: L}), &pinnedLease, nil, ownVersion{pinned: true}, false},
		{"the pin's version, another lease under the old key", job(2, 1, "running", map[string]string{nomad.OldLeaseMeta: "other"}), &pinnedLease, nil, ownVersion{}, false},
		{"at the grant's index", job(1, 1, "pending", nil), &pinnedLease, nil, ownVersion{granted: true}, false},
		{"a later version, the lease meta kept", job(3, 1, "running", map[string]string{nomad.LeaseMeta: L}), &pinnedLease, nil, ownVersion{}, false},
		{"the pin's version with another lease in its meta", job(2, 1, "running", map[string]string{nomad.LeaseMeta: "other"}), &pinnedLease, nil, ownVersion{}, false},
		{"the suspension's version", job(3, 0, "dead", susp), &revoking, nil, ownVersion{suspended: L}, false},
		{"the suspension's version, count 1", job(3, 1, "running", susp), &revoking, nil, ownVersion{}, false},
		{"a forged suspension, another version", job(4, 0, "dead", susp), &revoking, nil, ownVersion{}, true},
		{"suspended, released", job(3, 0, "dead", susp), nil, &lease.JobRecord{LastLease: L, Suspended: v(3)}, ownVersion{suspended: L}, false},
		{"released, then re-registered with the suspension copied", job(4, 0, "dead", susp), nil, &lease.JobRecord{LastLease: L, Suspended: v(3)}, ownVersion{}, true},
		{"copied, count 1", job(4, 1, "pending", susp), nil, &lease.JobRecord{LastLease: L, Suspended: v(3)}, ownVersion{}, false},
		{"a suspension naming no lease the planner took back", job(3, 0, "dead", map[string]string{nomad.SuspendedMeta: "other"}), nil, &lease.JobRecord{LastLease: L, Suspended: v(3)}, ownVersion{}, true},
		{"stopped by its user", func() *nomad.Job { j := job(3, 0, "dead", susp); j.Job.Stop = ptr(true); return j }(), nil, &lease.JobRecord{LastLease: L, Suspended: v(3)}, ownVersion{suspended: L}, true},
		{"legacy lease: the meta, once", job(7, 1, "running", map[string]string{nomad.LeaseMeta: L}), &legacy, nil, ownVersion{pinned: true, legacy: true}, false},
		{"legacy lease: the old key, once", job(7, 1, "running", map[string]string{nomad.OldLeaseMeta: L}), &legacy, nil, ownVersion{pinned: true, legacy: true}, false},
		{"legacy revoking lease, suspended", job(8, 0, "dead", susp), &legacyRevoking, nil, ownVersion{suspended: L}, false},
		{"legacy record, suspended", job(8, 0, "dead", susp), nil, &lease.JobRecord{LastLease: L}, ownVersion{suspended: L}, false},
		{"legacy record, count 1", job(8, 1, "pending", susp), nil, &lease.JobRecord{LastLease: L}, ownVersion{}, false},
		{"finished", job(2, 1, "dead", map[string]string{nomad.LeaseMeta: L}), &pinnedLease, nil, ownVersion{pinned: true}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &round{leases: map[core.JobKey]lease.JobLease{}, records: map[core.JobKey]lease.JobRecord{}}
			if tc.l != nil {
				r.leases[tc.j.Key] = *tc.l
			}
			if tc.rec != nil {
				r.records[tc.j.Key] = *tc.rec
			}
			if got := r.own(tc.j); got != tc.want {
				t.Errorf("own = %+v, want %+v", got, tc.want)
			}
			if got := r.finished(tc.j); got != tc.finished {
				t.Errorf("finished = %v, want %v", got, tc.finished)
			}
		})
	}
}

// A lease written by a planner before planners recorded the pinned
// version: the job is taken as pinned by its meta once, and the version is
// recorded; a forged re-registration after that is a new submission. A
// job such a planner suspended (its record without the version) resumes.
func TestLegacyRecordsAreAdoptedOnce(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	k := core.JobKey{Namespace: "default", ID: "train"}
	h.Nomad.Submit("train", 2, "be", "10s")
	h.Round("granted")
	l := h.Store.JobLeases[k]
	l.Pinned = nil // as an earlier planner wrote it
	h.Store.JobLeases[k] = l
	h.Round("the legacy lease")
	if got := h.Store.JobLeases[k]; got.LeaseID != l.LeaseID || got.Revoke != nil || got.Pinned == nil || *got.Pinned != (lease.JobVersion{CreateIndex: *h.Nomad.Jobs[k].CreateIndex, Version: *h.Nomad.Jobs[k].Version}) {
		t.Fatalf("lease %+v: want the same lease, with the job's version recorded", got)
	}
	h.Nomad.Reregister("train", func(j *api.Job) {})
	for i := range 6 {
		h.Round("after the re-registration " + itoa(i))
	}
	if got := h.Store.JobLeases[k]; got.LeaseID == l.LeaseID || h.Nomad.Suspensions != 1 {
		t.Fatalf("lease %+v, %d suspensions: the re-registered version is taken as pinned", got, h.Nomad.Suspensions)
	}

	// A suspension by an earlier planner: count 0, themis.suspended naming
	// the record's last lease, no version in the record.
	h.Nomad.Submit("old", 2, "be", "10s")
	old := core.JobKey{Namespace: "default", ID: "old"}
	j := h.Nomad.Jobs[old]
	j.TaskGroups[0].Count, j.Status, j.Meta = ptr(0), ptr("dead"), map[string]string{nomad.SuspendedMeta: "L0", nomad.CountMeta: "1"}
	h.Store.JobRecords[old] = lease.JobRecord{Namespace: "default", JobID: "old", FirstSubmit: h.Clock, LastLease: "L0", Preemptions: 1}
	h.Store.RecordIndex[old] = 1
	h.Round("the legacy suspension")
	if len(h.Nomad.Running("old")) != 1 {
		t.Fatalf("the job an earlier planner suspended did not resume: %+v", h.Store.JobStatuses[old])
	}
}

// A running job re-registered by its user as a job the planner rejects (a
// second themis task): still a new submission, so its lease is taken back
// through the revoke path and the running version stops; it does not run
// on, rejected, holding its GPUs.
func TestRejectedResubmissionStops(t *testing.T) {
	h := newHarness(t, 8, stack.Of(policies.FIFO{}))
	k := core.JobKey{Namespace: "default", ID: "train"}
	h.Nomad.Submit("train", 2, "be", "10s")
	h.Round("granted")
	h.Nomad.Reregister("train", func(j *api.Job) {
		tg := j.TaskGroups[0]
		second := *tg.Tasks[0]
		second.Name = "again"
		tg.Tasks = append(tg.Tasks, &second)
	})
	for i := range 6 {
		h.Round("after the broken version " + itoa(i))
	}
	if h.Nomad.Suspensions != 1 || len(h.Nomad.Running("train")) != 0 {
		t.Fatalf("suspended %d times, %d allocations running: want the old version stopped", h.Nomad.Suspensions, len(h.Nomad.Running("train")))
	}
	if l, ok := h.Store.JobLeases[k]; ok {
		t.Errorf("lease %+v still held", l)
	}
	if st := h.Store.JobStatuses[k]; st.State != "rejected" || !strings.Contains(st.Reason, "2 tasks are themis tasks") {
		t.Errorf("status %+v, want rejected naming the two themis tasks", st)
	}
}
