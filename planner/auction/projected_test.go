package auction

import (
	"math"
	"testing"
)

// ProjectedRho against CurrentRho, worked by hand (Env: 64 GPUs, 600-s
// lease; N_avg 2, so T_id = B / min(64, demand) x 2).
func TestProjectedRho(t *testing.T) {
	env := Env{ClusterGPUs: 64, Lease: 600}
	job := func(id string, left float64, held int) Job {
		return Job{ID: id, IterTime: 1, ItersLeft: left, ItersTotal: 3600, Demand: 1, Gang: 1, Held: held}
	}
	// A sweep of 16 one-hour trials holding 8 GPUs (8 trials half done)
	// with 8 queued, its fair share 8 GPUs: T_id = 57,600 / 16 x 2 = 7,200 s.
	holding := App{ID: "holding", Elapsed: 1800, NAvg: 2, FairShare: 8}
	for i := range 16 {
		if i < 8 {
			holding.Jobs = append(holding.Jobs, job("h", 1800, 1))
		} else {
			holding.Jobs = append(holding.Jobs, job("q", 3600, 0))
		}
	}
	// One queued 1-GPU job of 600 s that waited 600 s: T_id = 1,200 s.
	single := App{ID: "single", Elapsed: 600, NAvg: 2, FairShare: 1,
		Jobs: []Job{{ID: "s", IterTime: 1, ItersLeft: 600, ItersTotal: 600, Demand: 1, Gang: 1}}}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		// CurrentRho: no share left beyond the 8 GPUs held, so the eight
		// queued trials run one after another on one new GPU.
		{"holding current", holding.CurrentRho(env), (1800 + 8*3600 + 600) / 7200.0},
		// ProjectedRho: 8 x 1,800 + 8 x 3,600 = 43,200 GPU-s on 8 GPUs.
		{"holding projected", holding.ProjectedRho(env), (1800 + 600 + 43200/8) / 7200.0},
		// A single job: the same either way.
		{"single current", single.CurrentRho(env), (600 + 600 + 600) / 1200.0},
		{"single projected", single.ProjectedRho(env), (600 + 600 + 600) / 1200.0},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// The ranking the filter sees flips.
	if !(holding.CurrentRho(env) > single.CurrentRho(env) && holding.ProjectedRho(env) < single.ProjectedRho(env)) {
		t.Errorf("want the holding sweep first by CurrentRho and the single job first by ProjectedRho")
	}
	// Nothing queued: Rho(0), as CurrentRho; a gang the cluster cannot
	// hold: +Inf.
	held := App{ID: "held", NAvg: 1, Jobs: []Job{job("h", 100, 1)}}
	if a, b := held.ProjectedRho(env), held.CurrentRho(env); a != b {
		t.Errorf("held app: ProjectedRho %v != CurrentRho %v", a, b)
	}
	huge := App{ID: "huge", NAvg: 1, Jobs: []Job{{ID: "x", IterTime: 1, ItersLeft: 1, ItersTotal: 1, Demand: 128, Gang: 128}}}
	if r := huge.ProjectedRho(env); !math.IsInf(r, 1) {
		t.Errorf("huge gang: ProjectedRho = %v, want +Inf", r)
	}
}

// Halving.Doubling: the later phases' jobs want half the next phase's
// GPUs, so a sweep's app_demand_max is what its current phase wants, not
// every later job at the last phase's demand.
func TestHalvingDoubling(t *testing.T) {
	mk := func(doubling bool) App {
		a := App{ID: "sweep", NAvg: 1, Halving: &Halving{Iters: []float64{100, 200, 400}, Demand: 8, Doubling: doubling}}
		for range 8 {
			a.Jobs = append(a.Jobs, Job{ID: "j", IterTime: 1, ItersLeft: 100, ItersTotal: 100, Demand: 1, Gang: 1})
		}
		return a
	}
	// Later phases: 4 jobs, 2 jobs, 1 job of 100, 200 and 400 GPU-s.
	// Without Doubling each wants 8 GPUs (4 x 8 = 32 at once); with it 2,
	// 4 and 8 (8 at once, as the current phase).
	for _, tc := range []struct {
		doubling bool
		demand   int
	}{{false, 32}, {true, 8}} {
		a := mk(tc.doubling)
		if d := a.demandMax(); d != tc.demand {
			t.Errorf("doubling %v: demand max %d, want %d", tc.doubling, d, tc.demand)
		}
		if b := a.budget(); b != 800+400+400+400 {
			t.Errorf("doubling %v: budget %v, want 2000", tc.doubling, b)
		}
	}
}
