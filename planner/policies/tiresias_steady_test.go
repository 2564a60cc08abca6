package policies

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/gittins"
)

// 2D-Gittins's horizon, worked by hand on the samples 10, 20, 40, 100
// GPU-seconds with one threshold at 60 (the quantum Δ = 60):
//
//	G(0)  = 3/(10+20+40+60)  = 3/130: 1/G = 43.33
//	G(12) = 2/(8+28+60)      = 2/96:  1/G = 48, falling to 40 at 20
//	G(20) = 1/(20+60)        = 1/80   (20 passed: the index jumps down)
//	G(25) = 1/(15+60)        = 1/75
func TestSteadyUntilGittins(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	dist, err := gittins.New([]float64{10, 20, 40, 100})
	if err != nil {
		t.Fatal(err)
	}
	g := func(ix GittinsIndex) *Tiresias { return gittinsOn(t, ix, "tiresias.queues=60s") }
	run := func(id string, gpus int, attained float64) *core.Job {
		return &core.Job{Key: core.JobKey{Namespace: "default", ID: id}, GPUs: gpus, Phase: core.Granted, Attained: attained,
			Executed: attained / float64(gpus), Started: true, FirstStart: now.Add(-time.Hour)}
	}
	wait := func(id string, gpus int, attained float64) *core.Job {
		return &core.Job{Key: core.JobKey{Namespace: "default", ID: id}, GPUs: gpus, Phase: core.Queued, Attained: attained,
			Executed: attained / float64(gpus)}
	}
	never := time.Duration(-1)
	gain := 48 - 130.0/3
	reach := time.Duration(gain / 2 * float64(time.Second))
	for _, tc := range []struct {
		name   string
		policy *Tiresias
		jobs   []*core.Job
		want   time.Duration // from now; never: zero time
	}{
		{"rising to a waiting job's index: 48 - 43.33 GPU-seconds at 2 a second", g(dist),
			[]*core.Job{run("a", 2, 12), wait("b", 2, 0)}, reach},
		{"a jump down past a waiting index below: at 20, 8 GPU-seconds on", g(dist),
			[]*core.Job{run("a", 2, 12), wait("c", 1, 25)}, 4 * time.Second},
		{"nothing to meet: the queue's threshold (48 GPU-seconds on)", g(dist),
			[]*core.Job{run("a", 2, 12), wait("d", 1, 90)}, 24 * time.Second},
		{"a waiting job in the last queue is not in the running one's", g(dist),
			[]*core.Job{run("a", 2, 12), wait("e", 1, 70)}, 24 * time.Second},
		{"a running job in the last queue ranks FIFO", g(dist),
			[]*core.Job{run("a", 2, 70), wait("b", 2, 0)}, never},
		{"a tie moves at once", g(dist),
			[]*core.Job{run("a", 2, 0), wait("b", 2, 0)}, 0},
		{"an empty learned distribution: every index is 0, only the threshold", g(gittins.NewOnline(nil)),
			[]*core.Job{run("a", 2, 12), wait("b", 2, 0)}, 24 * time.Second},
		{"an index without Stretch stands only now", g(indexOnly{dist}),
			[]*core.Job{run("a", 2, 12), wait("d", 1, 90)}, 0},
	} {
		got := tc.policy.SteadyUntil(now, tc.jobs)
		switch {
		case tc.want == never:
			if !got.IsZero() {
				t.Errorf("%s: steady until %v, want never", tc.name, got.Sub(now))
			}
		case got.IsZero() || got.After(now.Add(tc.want)) || got.Before(now.Add(tc.want-time.Microsecond)):
			t.Errorf("%s: steady for %v, want %v (less a microsecond at most)", tc.name, got.Sub(now), tc.want)
		}
	}
}

// gittinsOn is 2D-Gittins with the knobs (policy), ranking by ix.
func gittinsOn(t *testing.T, ix GittinsIndex, knobs ...string) *Tiresias {
	t.Helper()
	p := policy(t, "tiresias-gittins", knobs...).(*Tiresias)
	p.SetIndex(ix)
	return p
}

// indexOnly hides a distribution's Stretch.
type indexOnly struct{ d *gittins.Distribution }

func (i indexOnly) Index(a, delta float64) float64 { return i.d.Index(a, delta) }

// The horizon's promise, on random distributions and jobs: at any time
// before it, with the running jobs' service grown at their rates, every
// running job ranks against every waiting one as it did now.
func TestGittinsHorizonHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	skipped := 0
	for trial := range 3000 {
		samples := make([]float64, 1+r.IntN(30))
		for i := range samples {
			samples[i] = math.Round(r.Float64() * 900)
		}
		dist, err := gittins.New(samples)
		if err != nil {
			t.Fatal(err)
		}
		p := gittinsOn(t, dist, "tiresias.queues=60s,600s")
		var jobs []*core.Job
		for i := range 2 + r.IntN(8) {
			gpus := 1 << r.IntN(4)
			j := &core.Job{Key: core.JobKey{Namespace: "default", ID: fmt.Sprintf("j%d", i)}, GPUs: gpus,
				Executed: math.Round(r.Float64()*700) / float64(gpus), Submitted: now.Add(-time.Duration(i) * time.Minute)}
			if r.IntN(2) == 0 {
				j.Phase, j.Started, j.FirstStart = core.Granted, true, now.Add(-time.Duration(r.IntN(100))*time.Second)
			} else {
				j.Phase = core.Queued
			}
			j.Attained = j.AttainedSinceReset()
			jobs = append(jobs, j)
		}
		until := p.SteadyUntil(now, jobs)
		before := order(p, now, jobs)
		horizon := 2 * time.Hour
		if !until.IsZero() {
			horizon = until.Sub(now)
		}
		if horizon > 0 {
			skipped++
		}
		for _, f := range []float64{0.1, 0.5, 0.9, 0.999999} {
			at := time.Duration(f * float64(horizon))
			later := make([]*core.Job, len(jobs))
			for i, j := range jobs {
				c := *j
				if c.Phase == core.Granted {
					c.Executed += c.ServiceRate() * at.Seconds() / float64(c.GPUs)
					c.Attained = c.AttainedSinceReset()
				}
				later[i] = &c
			}
			if after := order(p, now.Add(at), later); !slices.Equal(before, after) {
				t.Fatalf("trial %d: samples %v: steady for %v, but %v on the order of running against waiting jobs is %v, not %v\njobs: %s",
					trial, samples, horizon, at, after, before, describe(jobs))
			}
		}
	}
	if skipped == 0 {
		t.Fatal("no horizon was past now: the property tests nothing")
	}
	t.Logf("%d of 3000 horizons past now", skipped)
}

// order lists, for each running job and each waiting one, which ranks first.
func order(p *Tiresias, now time.Time, jobs []*core.Job) []string {
	ranked := slices.Clone(jobs)
	p.Rank(now, ranked)
	pos := map[core.JobKey]int{}
	for i, j := range ranked {
		pos[j.Key] = i
	}
	var out []string
	for _, a := range jobs {
		for _, b := range jobs {
			if a.Phase == core.Granted && b.Phase == core.Queued {
				out = append(out, fmt.Sprintf("%s<%s:%v", a.Key.ID, b.Key.ID, pos[a.Key] < pos[b.Key]))
			}
		}
	}
	return out
}

func describe(jobs []*core.Job) string {
	s := ""
	for _, j := range jobs {
		s += fmt.Sprintf("%s %v gpus=%d attained=%g; ", j.Key.ID, j.Phase, j.GPUs, j.AttainedSinceReset())
	}
	return s
}
