package nomad

import (
	"maps"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// A pinned version names its lease under themis.lease_id; one pinned by a
// planner before #34 names it under themis.lease, and still counts.
func TestMetaLeaseReadsBothKeys(t *testing.T) {
	cases := []struct {
		name string
		meta map[string]string
		want string
	}{
		{"none", nil, ""},
		{"other meta", map[string]string{"owner": "ml", RestartCountMeta: "1"}, ""},
		{"themis.lease_id", map[string]string{"themis.lease_id": "L1"}, "L1"},
		{"themis.lease (an older planner's pin)", map[string]string{"themis.lease": "L0"}, "L0"},
		{"both: the new key's", map[string]string{"themis.lease_id": "L1", "themis.lease": "L0"}, "L1"},
		{"the new key empty: the old one's", map[string]string{"themis.lease_id": "", "themis.lease": "L0"}, "L0"},
		{"a suspension is no lease", map[string]string{SuspendedMeta: "L1"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := MetaLeaseOf(tc.meta); got != tc.want {
				t.Errorf("MetaLeaseOf(%v) = %q, want %q", tc.meta, got, tc.want)
			}
			j := &Job{Job: &api.Job{Meta: tc.meta}}
			if got := j.MetaLease(); got != tc.want {
				t.Errorf("MetaLease() = %q, want %q", got, tc.want)
			}
		})
	}
}

// The pin writes the lease ID under themis.lease_id only and drops an old
// planner's themis.lease; the suspension drops both.
func TestPinAndSuspendRewriteTheLeaseKey(t *testing.T) {
	c := &Client{pendingPool: DefaultPendingPool}
	parse := func(meta map[string]string) (*api.Job, *Job) {
		a := jobWith(&api.TaskGroup{Name: ptr("g"), Count: ptr(1), Tasks: []*api.Task{themisTask("t", []any{map[string]any{"gpus": 2.0}})}})
		a.Meta = maps.Clone(meta)
		j, err := ParseJob(a)
		if err != nil || j.Err != nil {
			t.Fatalf("ParseJob: %v, %v", err, j.Err)
		}
		return a, j
	}
	l := lease.JobLease{LeaseID: "L2", NodeID: "n1", NodeName: "node-1", GPUs: []string{"g0", "g1"}}
	for _, meta := range []map[string]string{
		nil,
		{"themis.lease": "L1", RestartCountMeta: "0"},
		{"themis.lease_id": "L1", RestartCountMeta: "0"},
		{SuspendedMeta: "L1", CountMeta: "1"},
	} {
		a, j := parse(meta)
		if err := rewrite(a, j, "pin", c.pinChange(j, l, "gpu", 3)); err != nil {
			t.Fatal(err)
		}
		if _, old := a.Meta["themis.lease"]; old || a.Meta["themis.lease_id"] != "L2" || a.Meta[RestartCountMeta] != "3" {
			t.Errorf("pin of a version with meta %v: meta %v, want themis.lease_id = L2 and no themis.lease", meta, a.Meta)
		}
		a, j = parse(meta)
		if err := rewrite(a, j, "suspend", c.suspendChange(j, "L2")); err != nil {
			t.Fatal(err)
		}
		_, old := a.Meta["themis.lease"]
		_, cur := a.Meta["themis.lease_id"]
		if old || cur || a.Meta[SuspendedMeta] != "L2" {
			t.Errorf("suspension of a version with meta %v: meta %v, want themis.suspended = L2 and no lease key", meta, a.Meta)
		}
	}
}
