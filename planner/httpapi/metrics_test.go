package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/lease"
)

// After a scripted sequence of rounds the scrape has the queue, the GPUs
// per node, VC and state, the revokes in progress, the decision and round
// counters and the round latency.
func TestMetricsAfterRounds(t *testing.T) {
	second := fixture()
	second.Duration = 2 * time.Second
	second.Events = []planner.Event{
		{Time: t0, Kind: planner.EventRelease, Job: key("b"), Reason: "revoked"},
		{Time: t0, Kind: planner.EventGrant, Job: key("c"), Reason: "granted"},
	}
	failed := planner.View{Time: t0, Duration: 5 * time.Millisecond, Err: errTest}
	_, ts := leader(t, fixture(), failed, second, vcFixture())
	code, _, body := get(t, ts, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	scrape := body.(string)
	for _, want := range []string{
		`themis_queue_length{vc="vision"} 1`,
		`themis_gpus{node="dev-node",state="leased",vc="vision"} 1`,
		`themis_gpus{node="dev-node",state="free",vc="vision"} 1`,
		`themis_vc_gpus{state="used",vc="vision"} 1`,
		`themis_vc_gpus{state="free",vc="vision"} 1`,
		`themis_revokes_in_progress 0`,
		`themis_leases 1`,
		`themis_leader 1`,
		`themis_rounds_total 4`,
		`themis_round_errors_total 1`,
		`themis_decisions_total{kind="grant"} 1`,
		`themis_decisions_total{kind="preempt"} 1`,
		`themis_decisions_total{kind="release"} 1`,
		`themis_decisions_total{kind="promote"} 0`,
		`themis_round_duration_seconds_count 4`,
		`themis_round_duration_seconds_bucket{le="0.025"} 3`,
		`themis_round_duration_seconds_bucket{le="2.5"} 4`,
		`themis_api_index `,
		`go_goroutines `,
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	// The last view replaced the gauges of the first: no stale series.
	for _, gone := range []string{`themis_gpus{node="spare-node"`, `themis_queue_length{vc=""}`} {
		if strings.Contains(scrape, gone) {
			t.Errorf("scrape still has %s", gone)
		}
	}

	// And on the fixture alone: GPUs per state on both nodes, one revoke.
	_, ts = leader(t, fixture())
	_, _, body = get(t, ts, "/metrics")
	scrape = body.(string)
	for _, want := range []string{
		`themis_queue_length{vc=""} 2`,
		`themis_gpus{node="dev-node",state="leased",vc="default"} 2`,
		`themis_gpus{node="dev-node",state="revoking",vc="default"} 1`,
		`themis_gpus{node="dev-node",state="unhealthy",vc=""} 1`,
		`themis_gpus{node="spare-node",state="free",vc=""} 2`,
		`themis_revokes_in_progress 1`,
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// A job the round set aside (status unreadable) is counted, and the gauge
// falls back to 0 once no job is.
func TestMetricsCountJobsSetAside(t *testing.T) {
	aside := fixture()
	aside.Jobs = append(aside.Jobs, planner.JobView{Key: key("wedge/allocations"),
		Status: lease.JobStatus{Namespace: "default", JobID: "wedge/allocations", State: planner.StateUnreadable, Reason: "cannot be read"}})
	for _, c := range []struct {
		views []planner.View
		want  string
	}{
		{[]planner.View{aside}, `themis_jobs_unreadable 1`},
		{[]planner.View{aside, fixture()}, `themis_jobs_unreadable 0`},
	} {
		_, ts := leader(t, c.views...)
		_, _, body := get(t, ts, "/metrics")
		if scrape := body.(string); !strings.Contains(scrape, c.want+"\n") {
			t.Errorf("scrape lacks %s", c.want)
		}
	}
}

// themis_jobs counts jobs by state, every state present (0 when none), a
// failed job as failed, a queued job whose grant waits for its GPUs as
// waiting (as the views show it); the API's job says the same.
func TestMetricsCountJobsByState(t *testing.T) {
	_, ts := leader(t, fixture())
	_, _, body := get(t, ts, "/metrics")
	scrape := body.(string)
	for _, want := range []string{
		// c is recorded queued, granted GPUs b still holds: waiting.
		`themis_jobs{state="waiting"} 1`, `themis_jobs{state="queued"} 0`,
		`themis_jobs{state="granted"} 1`, `themis_jobs{state="revoking"} 1`,
		`themis_jobs{state="suspended"} 1`, `themis_jobs{state="rejected"} 1`, `themis_jobs{state="failed"} 1`,
		`themis_jobs{state="finished"} 0`, `themis_jobs{state="lost"} 0`,
	} {
		if !strings.Contains(scrape, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	_, _, job := get(t, ts, "/v1/jobs/default/crash")
	if at(t, job, "state") != "failed" || !strings.Contains(at(t, job, "reason").(string), "permission denied") {
		t.Errorf("/v1/jobs/default/crash: %v", job)
	}
}

// A job's wait is observed when it is granted, from the round it was
// first seen waiting (or its first submission, when it queued and was
// granted in one round), and each queue reports its longest wait.
func TestMetricsQueueWaits(t *testing.T) {
	first := fixture() // c and d wait from t0
	later := fixture()
	later.Time = t0.Add(90 * time.Second)
	later.Queue = later.Queue[1:] // c granted at t0+90s
	later.Events = []planner.Event{{Time: t0.Add(90 * time.Second), Kind: planner.EventGrant, Job: key("c")}}
	_, ts := leader(t, first, later)
	_, _, body := get(t, ts, "/metrics")
	scrape := body.(string)
	for _, want := range []string{
		`themis_queue_wait_seconds_bucket{vc="",le="60"} 0`,
		`themis_queue_wait_seconds_bucket{vc="",le="120"} 1`,
		`themis_queue_wait_seconds_count{vc=""} 1`,
		`themis_queue_oldest_wait_seconds{vc=""} 90`,
	} {
		if !strings.Contains(scrape, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// A skipped round (nothing changed) keeps the last decided view, is
// counted, and moves each queue's longest wait on to its time.
func TestMetricsSkippedRound(t *testing.T) {
	first := fixture() // c and d wait from t0
	skipped := planner.View{Time: t0.Add(2 * time.Minute), Duration: time.Millisecond, Skipped: true}
	_, ts := leader(t, first, skipped)
	_, _, body := get(t, ts, "/metrics")
	scrape := body.(string)
	for _, want := range []string{
		`themis_rounds_total 2`,
		`themis_rounds_skipped_total 1`,
		`themis_queue_oldest_wait_seconds{vc=""} 120`,
		`themis_queue_length{vc=""} 2`,
	} {
		if !strings.Contains(scrape, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	_, _, queue := get(t, ts, "/v1/queue")
	if q := fmt.Sprint(queue); !strings.Contains(q, "id:c") || !strings.Contains(q, "id:d") {
		t.Errorf("the queue after a skipped round lost the last decided view: %v", queue)
	}
}
