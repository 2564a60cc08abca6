package policies

import (
	"slices"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

func appJob(id, app string, gpus int, attained, rem float64, later int) *core.Job {
	return &core.Job{Key: core.JobKey{Namespace: "default", ID: id}, App: app, GPUs: gpus, Attained: attained, Remaining: rem, LaterPhases: later, Phase: core.Queued}
}

func jobIDs(jobs []*core.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Key.ID)
	}
	return out
}

// Each app-level baseline orders jobs by their app's metric, keeps an app's
// jobs together, and orders inside an app by the job's own metric.
func TestAppRankedOrder(t *testing.T) {
	for _, tc := range []struct {
		policy string
		jobs   []*core.Job
		want   []string
	}{
		{
			// Sweep s has attained 3 x 40 = 120 GPU-s in all, more than the
			// single job x (100), though each of its jobs has less.
			policy: "app-las",
			jobs: []*core.Job{
				appJob("s1", "s", 1, 40, 10, 0), appJob("s2", "s", 1, 30, 10, 0),
				appJob("s3", "s", 1, 50, 10, 0), appJob("x", "", 2, 100, 10, 0),
			},
			want: []string{"x", "s2", "s1", "s3"},
		},
		{
			// las would run s's short jobs first; app-srtf counts s's later
			// phase: 20 + 1 x (10/1 + 20) = 50 > x's 40.
			policy: "app-srtf",
			jobs: []*core.Job{
				appJob("s1", "s", 1, 10, 20, 1), appJob("s2", "s", 1, 10, 5, 1),
				appJob("x", "", 1, 0, 40, 0),
			},
			want: []string{"x", "s2", "s1"},
		},
		{
			// Without later phases s's remaining time is 20 < 40.
			policy: "app-srtf",
			jobs: []*core.Job{
				appJob("s1", "s", 1, 10, 20, 0), appJob("s2", "s", 1, 10, 5, 0),
				appJob("x", "", 1, 0, 40, 0),
			},
			want: []string{"s2", "s1", "x"},
		},
		{
			// app-srsf: s has 2 x 10 x 4 = 80 GPU-s left, x 1 x 60 = 60;
			// srsf would put s's jobs (40 each) first.
			policy: "app-srsf",
			jobs: []*core.Job{
				appJob("s1", "s", 4, 0, 10, 0), appJob("s2", "s", 4, 0, 10, 0),
				appJob("x", "", 1, 0, 60, 0),
			},
			want: []string{"x", "s1", "s2"},
		},
		{
			// One later phase adds the current phase's whole work: s has 8
			// GPU-s left + 1 x 16 = 24 > x's 20 (8 alone would go first).
			policy: "app-srsf",
			jobs: []*core.Job{
				appJob("s1", "s", 2, 4, 2, 1), appJob("s2", "s", 2, 4, 2, 1),
				appJob("x", "", 1, 0, 20, 0),
			},
			want: []string{"x", "s1", "s2"},
		},
		{
			// Unknown remaining times sort last.
			policy: "app-srtf",
			jobs: []*core.Job{
				appJob("u", "", 1, 0, -1, 0), appJob("x", "", 1, 0, 40, 0),
			},
			want: []string{"x", "u"},
		},
	} {
		p, err := newPolicy(tc.policy, core.Knobs{})
		if err != nil {
			t.Fatal(err)
		}
		if !p.Preemptive() || p.Blocking() {
			t.Errorf("%s: want preemptive, not blocking", tc.policy)
		}
		p.Rank(time.Unix(0, 0), tc.jobs)
		if got := jobIDs(tc.jobs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: rank = %v, want %v", tc.policy, got, tc.want)
		}
	}
}

// app-las remembers the service of an app's finished jobs: a sweep whose
// first phase has run is behind a new app even when its next phase's jobs
// have attained nothing yet.
func TestAppLASCountsFinishedJobs(t *testing.T) {
	p := NewAppLAS()
	t0 := time.Unix(1000, 0)
	run := appJob("s-p1", "s", 4, 400, 50, 1)
	run.Phase = core.Granted
	other := appJob("y", "", 1, 300, 1000, 0)
	p.Rank(t0, []*core.Job{run, other})
	// s-p1 finished 50 s later (4 GPUs x 50 s more), and its app's next
	// phase arrived; y has attained 300 GPU-s.
	next := appJob("s-p2", "s", 8, 0, 50, 0)
	jobs := []*core.Job{next, other}
	p.Rank(t0.Add(50*time.Second), jobs)
	if got := jobIDs(jobs); !slices.Equal(got, []string{"y", "s-p2"}) {
		t.Fatalf("rank = %v, want y first (s has 600 GPU-s)", got)
	}
	if got := p.gone["s"]; got != 600 {
		t.Errorf("service of s's finished jobs = %v, want 600", got)
	}
	// A queued job that leaves adds only what it had.
	p.Rank(t0.Add(60*time.Second), []*core.Job{next})
	if got := p.gone[appOf(other)]; got != 300 {
		t.Errorf("service of y after it left = %v, want 300", got)
	}
}
