package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// The hold stops every group (nothing to place, no blocked evaluation),
// moves the job into the pending pool unpinned and names the hold in its
// meta; the pin gives the group the count the lease carries from the
// planner's record (never from meta), drops the hold's meta, and
// sends no version tag (a registration would carry it into the pinned
// version).
func TestHoldThenPinRestoresCounts(t *testing.T) {
	c := &Client{pendingPool: DefaultPendingPool}
	a := jobWith(
		&api.TaskGroup{Name: ptr("g"), Count: ptr(1), Tasks: []*api.Task{themisTask("t", []any{map[string]any{"gpus": 2.0}}), {Name: "log", Driver: "exec"}}},
	)
	a.NodePool, a.JobModifyIndex, a.Version = ptr("default"), ptr(uint64(7)), ptr(uint64(2))
	j, err := ParseJob(a)
	if err != nil || j.Err != nil {
		t.Fatalf("ParseJob: %v, %v", err, j.Err)
	}
	if got := j.GroupCounts(); got["g"] != 1 || len(got) != 1 || j.Idle() {
		t.Fatalf("counts %v idle %v, want g=1, not idle", got, j.Idle())
	}
	held, err := current(j)
	if err != nil {
		t.Fatal(err)
	}
	if err := rewrite(held, j, "hold", c.holdChange(j, "H1")); err != nil {
		t.Fatal(err)
	}
	if *held.TaskGroups[0].Count != 0 || *held.NodePool != DefaultPendingPool || held.Meta[HeldMeta] != "H1" {
		t.Fatalf("held: count %d pool %s meta %v; want 0 in the pending pool, the hold named",
			*held.TaskGroups[0].Count, *held.NodePool, held.Meta)
	}
	// Nomad has the held version, tagged, with a forged count in meta.
	held.VersionTag = &api.JobVersionTag{Name: HeldTag, Description: "queued"}
	held.Meta[CountMeta] = "8"
	held.JobModifyIndex = ptr(uint64(9))
	hj, err := ParseJob(held)
	if err != nil || hj.Err != nil {
		t.Fatalf("ParseJob held: %v, %v", err, hj.Err)
	}
	if d, ok := hj.HeldTagDescription(); !ok || d != "queued" || !hj.Idle() {
		t.Fatalf("held tag %q %v idle %v", d, ok, hj.Idle())
	}
	pinned, err := current(hj)
	if err != nil {
		t.Fatal(err)
	}
	if pinned.VersionTag != nil {
		t.Fatal("the copy to register carries the held version's tag")
	}
	l := lease.JobLease{LeaseID: "L1", NodeID: "n1", NodeName: "node-1", GPUs: []string{"g0", "g1"}, Counts: map[string]int{"g": 1}}
	if err := rewrite(pinned, hj, "pin", c.pinChange(hj, l, "gpu", 0)); err != nil {
		t.Fatal(err)
	}
	if *pinned.TaskGroups[0].Count != 1 || pinned.Meta[HeldMeta] != "" || pinned.Meta[CountMeta] != "" {
		t.Errorf("pinned: count %d meta %v; want 1 (the lease's, not meta's 8), no hold or count meta",
			*pinned.TaskGroups[0].Count, pinned.Meta)
	}
}
