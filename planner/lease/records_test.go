package lease

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// The values below are what planner/consul wrote for these records before
// JobRecord and JobStatus moved here (json.Marshal of consul.JobRecord and
// consul.JobStatus at 602baa4): records already in Consul must read back,
// and new writes must be byte-identical.
var (
	goldenAt = time.Date(2026, 3, 1, 12, 30, 15, 250_000_000, time.UTC)

	goldenRecords = []struct {
		r    JobRecord
		want string
	}{
		{JobRecord{Namespace: "team-a", JobID: "train/1", FirstSubmit: goldenAt, FirstStart: goldenAt.Add(90 * time.Second),
			Executed: 3600.5, Attained: 14402, Preemptions: 2, LastLease: "lease-7", Suspended: &JobVersion{CreateIndex: 17, Version: 4},
			PromotedAt: goldenAt.Add(time.Hour), ExecutedAtPromotion: 1800.25},
			`{"namespace":"team-a","job_id":"train/1","first_submit":"2026-03-01T12:30:15.25Z","first_start":"2026-03-01T12:31:45.25Z","executed_s":3600.5,"attained_gpu_s":14402,"preemptions":2,"last_lease":"lease-7","suspended":{"create_index":17,"version":4},"promoted_at":"2026-03-01T13:30:15.25Z","executed_at_promotion_s":1800.25}`},
		{JobRecord{Namespace: "default", JobID: "j", FirstSubmit: goldenAt},
			`{"namespace":"default","job_id":"j","first_submit":"2026-03-01T12:30:15.25Z","executed_s":0,"attained_gpu_s":0,"preemptions":0}`},
	}

	goldenStatuses = []struct {
		s    JobStatus
		want string
	}{
		{JobStatus{Namespace: "team-a", JobID: "train/1", State: "revoking", Reason: `preempted by "x" <y>`, Node: "n1",
			GPUs: []string{"g0", "g1"}, LeaseID: "lease-7", Deadline: goldenAt.Add(time.Minute), Preemptions: 3, Since: goldenAt, Driver: "docker"},
			`{"namespace":"team-a","job_id":"train/1","state":"revoking","reason":"preempted by \"x\" \u003cy\u003e","node":"n1","gpus":["g0","g1"],"lease_id":"lease-7","deadline":"2026-03-01T12:31:15.25Z","preemptions":3,"since":"2026-03-01T12:30:15.25Z","driver":"docker"}`},
		{JobStatus{Namespace: "default", JobID: "j", State: "queued", Since: goldenAt},
			`{"namespace":"default","job_id":"j","state":"queued","since":"2026-03-01T12:30:15.25Z"}`},
	}
)

func TestJobRecordEncoding(t *testing.T) {
	for _, g := range goldenRecords {
		// The index is the store's, for check-and-set: never in the value,
		// so a record read at an index encodes as the same bytes.
		r := WithIndex(g.r, 42)
		if r.Index() != 42 || g.r.Index() != 0 {
			t.Fatalf("WithIndex: index %d (copy %d), want 42 (0)", r.Index(), g.r.Index())
		}
		for _, v := range []JobRecord{g.r, r} {
			b, err := v.Value()
			if err != nil || string(b) != g.want {
				t.Errorf("Value() = %s, %v\nwant        %s", b, err, g.want)
			}
			if m, _ := json.Marshal(v); string(m) != g.want {
				t.Errorf("json.Marshal = %s\nwant           %s", m, g.want)
			}
		}
		var back JobRecord
		if err := json.Unmarshal([]byte(g.want), &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, g.r) || back.Index() != 0 {
			t.Errorf("decoded %+v (index %d), want %+v (index 0)", back, back.Index(), g.r)
		}
		if k := r.Key(); k != (core.JobKey{Namespace: g.r.Namespace, ID: g.r.JobID}) {
			t.Errorf("Key() = %v", k)
		}
	}
}

func TestJobStatusEncoding(t *testing.T) {
	for _, g := range goldenStatuses {
		b, err := g.s.Value()
		if err != nil || string(b) != g.want {
			t.Errorf("Value() = %s, %v\nwant        %s", b, err, g.want)
		}
		if m, _ := json.Marshal(g.s); string(m) != g.want {
			t.Errorf("json.Marshal = %s\nwant           %s", m, g.want)
		}
		var back JobStatus
		if err := json.Unmarshal([]byte(g.want), &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, g.s) {
			t.Errorf("decoded %+v, want %+v", back, g.s)
		}
		if k := g.s.Key(); k != (core.JobKey{Namespace: g.s.Namespace, ID: g.s.JobID}) {
			t.Errorf("Key() = %v", k)
		}
	}
}
