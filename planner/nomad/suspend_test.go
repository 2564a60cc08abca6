package nomad

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The group's count is checked against the count the planner's records
// say a version has (1 submitted, the parts of a pinned gang, 0 suspended);
// meta the job carries changes nothing (what a suspended job is, and a
// finished one, the planner says from its records: planner/own.go).
func TestCheckCount(t *testing.T) {
	ok := []any{map[string]any{"gpus": 2.0}}
	mk := func(count *int, meta map[string]string) *Job {
		j := jobWith(&api.TaskGroup{Name: ptr("g"), Count: count, Tasks: []*api.Task{themisTask("t", ok)}})
		j.Meta, j.Status = meta, ptr("dead")
		pj, err := ParseJob(j)
		if err != nil || pj.Err != nil {
			t.Fatal(err, pj.Err)
		}
		return pj
	}
	cases := []struct {
		name string
		job  *Job
		want int
		err  string
	}{
		{"submitted", mk(ptr(1), nil), 1, ""},
		{"count unset: Nomad's 1", mk(nil, nil), 1, ""},
		{"suspended by the planner", mk(ptr(0), nil), 0, ""},
		{"a pinned gang of 3", mk(ptr(3), nil), 3, ""},
		{"count 0 by the user", mk(ptr(0), nil), 1, "group count = 0; a themis job's group runs one instance"},
		{"count 3 with the gang meta forged", mk(ptr(3), map[string]string{GangMeta: "3"}), 1, "group count = 3"},
		{"count 0 with the suspension forged", mk(ptr(0), map[string]string{SuspendedMeta: "L1", CountMeta: "1"}), 1, "group count = 0"},
		{"a pinned gang scaled", mk(ptr(4), nil), 2, "group count = 4, where the planner registered 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.job.Dead() {
				t.Error("Dead() = false for a dead job")
			}
			err := CheckCount(tc.job, tc.want)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestAllocRanFor(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	cases := []struct {
		name string
		a    Alloc
		want time.Duration
	}{
		{"not started", Alloc{ClientStatus: "pending"}, 0},
		{"running", Alloc{ClientStatus: "running", Started: t0}, time.Minute},
		{"finished", Alloc{ClientStatus: "complete", Started: t0, Finished: t0.Add(20 * time.Second)}, 20 * time.Second},
		{"lost without a finish time", Alloc{ClientStatus: "lost", Started: t0}, 0},
		{"restarted: finish before start means running", Alloc{ClientStatus: "running", Started: t0.Add(30 * time.Second), Finished: t0}, 30 * time.Second},
	}
	for _, tc := range cases {
		if got := tc.a.RanFor(now); got != tc.want {
			t.Errorf("%s: RanFor = %s, want %s", tc.name, got, tc.want)
		}
	}
}
