package sim

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/quota"
	"github.com/themis-nomad/themis/planner/trace"
)

// TestPeriodicCheckpointLoss: A (8 GPUs, 100 s, first in the trace: its
// first checkpoint after E s of execution) is preempted by B at 40 under
// las and resumes at 90 (no costs). Without periodic checkpoints it loses
// nothing and ends at 150; with E = 30 it checkpointed at 30 and loses 10
// s (80 GPU-s), redone: it ends at 160; with E = 25, 15 s: 165.
func TestPeriodicCheckpointLoss(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{
		{ID: "A", GPUs: 8, Duration: 100, Model: "resnet50"},
		{ID: "B", GPUs: 8, Duration: 50, Submit: 40, Model: "resnet50"},
	}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	for _, c := range []struct {
		every, lost, endA float64
	}{{0, 0, 150}, {30, 80, 160}, {25, 120, 165}, {1000, 320, 190}} {
		r := run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, "las"), CheckpointEvery: c.every})
		a := r.Jobs[0]
		if math.Abs(r.LostWork-c.lost) > tol || math.Abs(a.LostWork-c.lost) > tol || math.Abs(a.End-c.endA) > tol {
			t.Errorf("every %v: lost %v (A %v), A ends %v; want %v lost, A ends %v", c.every, r.LostWork, a.LostWork, a.End, c.lost, c.endA)
		}
		if r.CheckpointEvery != c.every || r.Preemptions != 1 {
			t.Errorf("every %v: result says every %v, %d preemptions", c.every, r.CheckpointEvery, r.Preemptions)
		}
	}
}

// TestFirstCheckpointsSpread: the first checkpoints of consecutive jobs
// fall at different points of the period, all in (0, E].
func TestFirstCheckpointsSpread(t *testing.T) {
	const every = 600.0
	seen := map[int]bool{}
	for seq := uint64(0); seq < 10; seq++ {
		f := firstCheckpoint(every, seq)
		if !(f > 0 && f <= every) {
			t.Fatalf("job %d: first checkpoint after %v s, want in (0, %v]", seq, f, every)
		}
		seen[int(f/every*10)] = true // tenths of the period
	}
	if len(seen) < 8 {
		t.Errorf("10 jobs' first checkpoints fall in %d tenths of the period, want them spread", len(seen))
	}
	var c ckptClock
	c.start(100, 0, false)
	c.run(100, 250, 0.5)
	if math.Abs(c.since-50) > tol || math.Abs(c.work-25) > tol || math.Abs(c.next-50) > tol {
		t.Errorf("after 250 s at half speed, period 100: since %v work %v next %v; want 50, 25, 50", c.since, c.work, c.next)
	}
}

// TestTiresiasLeastLostWorkInTheSimulator: X and Y (4 GPUs each) are in
// Tiresias's second queue (450 GPU-s) when Z arrives at 200 on 8 GPUs;
// one must go, and Z (400 GPU-s) stays in the first queue.
// By first start (the paper) Y, started later, goes, losing 82.7 s x 4;
// with preempt.victims=least-lost-work X goes, which checkpointed at 150
// and loses 50 s x 4.
func TestTiresiasLeastLostWorkInTheSimulator(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{
		{ID: "X", GPUs: 4, Duration: 1000, Model: "resnet50"},
		{ID: "Y", GPUs: 4, Duration: 1000, Submit: 60, Model: "resnet50"},
		{ID: "Z", GPUs: 4, Duration: 100, Submit: 200, Model: "resnet50"},
	}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	yLost := 4 * (140 - firstCheckpoint(150, 1))
	for _, c := range []struct {
		victims core.VictimOrder
		victim  string
		lost    float64
	}{{core.VictimsByPolicy, "Y", yLost}, {core.LeastLostWork, "X", 200}} {
		r := run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, "tiresias-las", "tiresias.queues=450"),
			CheckpointEvery: 150, Victims: c.victims})
		var pre []string
		for _, j := range r.Jobs {
			if j.Preemptions > 0 {
				pre = append(pre, j.ID)
			}
			if !j.Finished {
				t.Errorf("%v: %s did not finish", c.victims, j.ID)
			}
		}
		if !reflect.DeepEqual(pre, []string{c.victim}) || math.Abs(r.LostWork-c.lost) > 1e-6 {
			t.Errorf("%v: preempted %v losing %v GPU-s; want [%s] losing %v", c.victims, pre, r.LostWork, c.victim, c.lost)
		}
	}
}

// TestPropertyLostWork runs random traces under preemptive policies and
// FitGpp's: without periodic checkpoints nothing is lost and the knob
// changes nothing (every job ties at no loss); with them every job still
// finishes, a job loses less than one period per preemption, and the
// jobs' losses add up to the run's, which is positive once jobs are
// preempted after running.
func TestPropertyLostWork(t *testing.T) {
	positive := 0
	for seed := int64(0); seed < 12; seed++ {
		rng := rand.New(rand.NewSource(seed))
		tr := randomTrace(rng, 60)
		cl := randomCluster(t, rng)
		for _, name := range []string{"las", "tiresias-las", "srtf"} {
			base := run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, name), Seed: seed})
			knob := run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, name), Seed: seed, Victims: core.LeastLostWork})
			if base.LostWork != 0 || !reflect.DeepEqual(base.Jobs, knob.Jobs) {
				t.Fatalf("seed %d %s: without periodic checkpoints lost %v, and the knob changed the jobs: %v", seed, name, base.LostWork, base.LostWork != 0)
			}
			for _, victims := range []core.VictimOrder{core.VictimsByPolicy, core.LeastLostWork} {
				const every = 300.0
				r := run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, name), Seed: seed, CheckpointEvery: every, Victims: victims})
				sum := 0.0
				for _, j := range r.Jobs {
					if !j.Finished && j.GPUs <= cl.TotalGPUs() {
						t.Fatalf("seed %d %s %v: job %s did not finish", seed, name, victims, j.ID)
					}
					if j.LostWork < 0 || j.LostWork > float64(j.Preemptions*j.GPUs)*every+1e-6 {
						t.Fatalf("seed %d %s %v: job %s lost %v GPU-s in %d preemptions of %d GPUs", seed, name, victims, j.ID, j.LostWork, j.Preemptions, j.GPUs)
					}
					sum += j.LostWork
				}
				if math.Abs(sum-r.LostWork) > 1e-6*math.Max(1, sum) {
					t.Fatalf("seed %d %s %v: jobs lost %v, the run %v", seed, name, victims, sum, r.LostWork)
				}
				if r.LostWork > 0 {
					positive++
				}
			}
		}
	}
	if positive == 0 {
		t.Fatal("no run lost work: periodic checkpoints were never exercised")
	}
}

func TestParseCheckpointEvery(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		err  bool
	}{
		{"0", 0, false}, {"600", 600, false}, {" 10m ", 600, false}, {"1.5", 1.5, false},
		{"-1", 0, true}, {"inf", 0, true}, {"NaN", 0, true}, {"ten", 0, true}, {"", 0, true}, {"-5m", 0, true},
	} {
		got, err := ParseCheckpointEvery(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseCheckpointEvery(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
		if err != nil && (!strings.Contains(err.Error(), KnobCheckpointEvery) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.in))) {
			t.Errorf("error %q does not name the knob and the value", err)
		}
	}
	k, _ := core.ParseKnobs([]string{"sim.checkpoint_every=2m"})
	if v, err := CheckpointEvery(k); err != nil || v != 120 {
		t.Errorf("CheckpointEvery(2m) = %v, %v", v, err)
	}
	if _, err := Run(Config{Trace: &trace.Trace{}, Cluster: mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8)),
		Policy: newPolicy(t, "las"), CheckpointEvery: -1}); err == nil || !strings.Contains(err.Error(), KnobCheckpointEvery) {
		t.Errorf("Run with a negative period: %v, want an error naming %s", err, KnobCheckpointEvery)
	}
}

// FuzzParseCheckpointEvery: any value parses to a finite number >= 0 or
// is an error naming the knob.
func FuzzParseCheckpointEvery(f *testing.F) {
	for _, s := range []string{"0", "600", "10m", "-1", "inf", "1e308", "1e400", "0x10", "3h2m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseCheckpointEvery(s)
		if err != nil {
			if !strings.Contains(err.Error(), KnobCheckpointEvery) {
				t.Fatalf("error %q does not name %s", err, KnobCheckpointEvery)
			}
			return
		}
		if !(v >= 0) || math.IsInf(v, 0) {
			t.Fatalf("%q parsed to %v", s, v)
		}
	})
}

// costPlacer is a quota placer that records the victim cost it is given.
type costPlacer struct {
	*quota.Placer
	cost func(core.JobKey) float64
}

func (c *costPlacer) SetVictimCost(f func(core.JobKey) float64) { c.cost = f }

// TestVictimCostReachesThePlacer: under least-lost-work the simulator gives
// a placer that takes victim costs (HiveD) the jobs' lost work; by
// default it gives none.
func TestVictimCostReachesThePlacer(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{{ID: "A", GPUs: 2, Duration: 100, VC: "v", Model: "resnet50"}}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	for _, victims := range []core.VictimOrder{core.VictimsByPolicy, core.LeastLostWork} {
		p := &costPlacer{Placer: quota.New(map[string]int{"v": 8})}
		run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, "fifo"), Placer: p, CheckpointEvery: 30, Victims: victims})
		if (p.cost != nil) != (victims == core.LeastLostWork) {
			t.Fatalf("%v: placer given a cost: %v", victims, p.cost != nil)
		}
		if p.cost != nil {
			// A finished after 100 s, its last checkpoint 10 s before:
			// the core's view of it is kept, with 10 s x 2 GPUs to lose.
			if got := p.cost(core.JobKey{Namespace: "sim", ID: "A"}); math.Abs(got-20) > 1e-6 {
				t.Errorf("cost of A = %v, want 20", got)
			}
			if got := p.cost(core.JobKey{Namespace: "sim", ID: "nobody"}); got != 0 {
				t.Errorf("cost of an unknown job = %v, want 0", got)
			}
		}
	}
}
