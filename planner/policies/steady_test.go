package policies

import (
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// How long each steady policy's decision stands with only the clock moving
// (core.Steady): the live planner skips unchanged rounds until then.
func TestSteadyUntil(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	run := func(id string, gpus int, attained, rate float64) *core.Job {
		return &core.Job{Key: core.JobKey{Namespace: "default", ID: id}, GPUs: gpus, Phase: core.Granted, Attained: attained,
			Executed: attained / float64(gpus), RunRate: rate}
	}
	wait := func(id string, gpus int, attained float64) *core.Job {
		return &core.Job{Key: core.JobKey{Namespace: "default", ID: id}, GPUs: gpus, Phase: core.Queued, Attained: attained,
			Executed: attained / float64(gpus)}
	}
	tiresias, err := NewTiresias(false, queues60(t))
	if err != nil {
		t.Fatal(err)
	}
	gittins, err := NewTiresias(true, queues60(t))
	if err != nil {
		t.Fatal(err)
	}
	fitgpp, err := NewFitGpp(core.Knobs{})
	if err != nil {
		t.Fatal(err)
	}
	left := func(j *core.Job, remaining, skew float64) *core.Job {
		j.Remaining, j.Skew = remaining, skew
		return j
	}
	class := func(j *core.Job, c string) *core.Job {
		j.Class = c
		return j
	}
	never := time.Time{}
	for _, tc := range []struct {
		name   string
		policy core.Steady
		jobs   []*core.Job
		want   time.Time
	}{
		{"fifo: never", FIFO{}, []*core.Job{run("a", 2, 10, 0), wait("b", 2, 0)}, never},
		{"gandiva: never", Gandiva{}, []*core.Job{run("a", 2, 10, 0), wait("b", 2, 0)}, never},
		{"fitgpp: never", fitgpp, []*core.Job{run("a", 2, 10, 0), wait("b", 2, 0)}, never},
		{"lrtp: never", LRTP{}, []*core.Job{run("a", 2, 10, 0), wait("b", 2, 0)}, never},
		{"rand: never, even while a trial-and-error job waits", NewRandomPreempt(), []*core.Job{run("a", 2, 10, 0), wait("b", 2, 0), class(wait("c", 1, 0), core.ClassTrialAndError)}, never},
		{"las: nobody waits", LAS{}, []*core.Job{run("a", 2, 10, 0)}, never},
		{"las: a running job reaches the waiting one's service", LAS{}, []*core.Job{run("a", 2, 10, 0), wait("b", 4, 30)}, now.Add(10 * time.Second)},
		{"las: the first waiting service above, not the least", LAS{}, []*core.Job{run("a", 2, 10, 0), wait("b", 4, 5), wait("c", 1, 14)}, now.Add(2 * time.Second)},
		{"las: the soonest of the running jobs", LAS{}, []*core.Job{run("a", 2, 10, 0), run("g", 8, 0, 0), wait("b", 4, 30)}, now.Add(30 * time.Second / 8)},
		{"las: a gang of two parts gains service twice as fast", LAS{}, []*core.Job{run("a", 2, 10, 2), wait("b", 4, 30)}, now.Add(5 * time.Second)},
		{"las: a tie may break either way at once", LAS{}, []*core.Job{run("a", 2, 10, 0), wait("b", 4, 10)}, now},
		{"tiresias: crossing the first queue's 60 GPU-seconds", tiresias, []*core.Job{run("a", 2, 40, 0), wait("b", 2, 0)}, now.Add(10 * time.Second)},
		{"tiresias: a gang crosses it sooner", tiresias, []*core.Job{run("a", 2, 40, 2), wait("b", 2, 0)}, now.Add(5 * time.Second)},
		{"2d-gittins without a distribution: ranked as 2D-LAS", gittins, []*core.Job{run("a", 2, 40, 0), wait("b", 2, 0)}, now.Add(10 * time.Second)},
		{"srtf: no waiting job's remaining time is known", SRTF{}, []*core.Job{left(run("a", 2, 10, 0), 50, 0), left(wait("b", 2, 0), -1, 0)}, never},
		{"srtf: a running job's remaining time falls to a waiting one's", SRTF{}, []*core.Job{left(run("a", 2, 10, 0), 50, 0), left(wait("b", 2, 0), 30, 0)}, now.Add(20 * time.Second)},
		{"srtf: the nearest waiting time below, not the least", SRTF{}, []*core.Job{left(run("a", 2, 10, 0), 50, 0), left(wait("b", 2, 0), 10, 0), left(wait("c", 2, 0), 40, 0)}, now.Add(10 * time.Second)},
		{"srtf: a longer waiting job is never reached", SRTF{}, []*core.Job{left(run("a", 2, 10, 0), 50, 0), left(wait("b", 2, 0), 80, 0)}, never},
		{"srtf: a running job of unknown remaining time falls nowhere", SRTF{}, []*core.Job{left(run("a", 2, 10, 0), -1, 0), left(wait("b", 2, 0), 30, 0)}, never},
		{"srtf: a tie may break either way at once", SRTF{}, []*core.Job{left(run("a", 2, 10, 0), 30, 0), left(wait("b", 2, 0), 30, 0)}, now},
		{"srsf: remaining service falls at the job's GPUs a second", SRSF{}, []*core.Job{left(run("a", 2, 10, 0), 50, 0), left(wait("b", 4, 0), 20, 0)}, now.Add(10 * time.Second)},
		{"optimus: and at its skew times that", Optimus{}, []*core.Job{left(run("a", 2, 10, 0), 50, 2), left(wait("b", 1, 0), 100, 0)}, now.Add(25 * time.Second)},
	} {
		if got := tc.policy.SteadyUntil(now, tc.jobs); !got.Equal(tc.want) {
			t.Errorf("%s: steady until %v, want %v", tc.name, got, tc.want)
		}
	}
}

func queues60(t *testing.T) core.Knobs {
	t.Helper()
	k, err := core.ParseKnobs([]string{"tiresias.queues=60s"})
	if err != nil {
		t.Fatal(err)
	}
	return k
}
