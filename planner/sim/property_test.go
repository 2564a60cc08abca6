package sim

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/trace"
)

var propertyTrials = flag.Int("sim.trials", 0, "random traces per policy in TestPropertyRandomTraces (0: 6, or 2 with -short)")

// checked wraps a policy to look at the simulator's state at every round
// (Decide hands Rank its active jobs, after promotions) and to bound the
// number of rounds, so that a simulation that never ends fails instead of
// hanging. It passes on the capabilities the property tests exercise
// (promotion, recheck, room, seeding, learning) as the policy's own.
type checked struct {
	core.Policy
	capacity, rounds, limit int
	err                     error
}

var errTooManyRounds = errors.New("too many rounds")

func (c *checked) Rank(now time.Time, jobs []*core.Job) {
	c.rounds++
	if c.rounds > c.limit {
		panic(errTooManyRounds)
	}
	busy := 0
	for _, j := range jobs {
		if j.Phase == core.Granted {
			busy += j.GPUs
		}
		if c.err == nil && (j.Executed < 0 || j.Waited < 0 || j.Attained < 0 || j.Remaining < 0) {
			c.err = fmt.Errorf("round %d: %s has negative counters %+v", c.rounds, j.Key, *j)
		}
	}
	if c.err == nil && busy > c.capacity {
		c.err = fmt.Errorf("round %d at %v: running jobs hold %d GPUs, the cluster has %d", c.rounds, now.Sub(epoch).Seconds(), busy, c.capacity)
	}
	c.Policy.Rank(now, jobs)
}

// Capabilities implements core.Policy: the wrapped policy's, ranking
// through c.
func (c *checked) Capabilities() core.Capabilities {
	in := c.Policy.Capabilities()
	return core.Capabilities{Policy: c, Promoter: in.Promoter, Rechecker: in.Rechecker, RoomMaker: in.RoomMaker,
		Seeder: in.Seeder, Learner: in.Learner}
}

// runChecked runs cfg with its policy wrapped in checked; it fails the test
// when the run takes more than limit rounds.
func runChecked(t *testing.T, cfg Config, limit int) (r *Result, c *checked) {
	t.Helper()
	c = &checked{Policy: cfg.Policy, capacity: cfg.Cluster.TotalGPUs(), limit: limit}
	if a := cfg.Policy.Capabilities().Allocator; a != nil {
		cfg.Policy = &checkedAllocator{c, a}
	} else {
		cfg.Policy = c
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if p != errTooManyRounds {
					panic(p)
				}
				t.Fatalf("%s on %s: no end after %d rounds", c.Name(), cfg.Cluster.Name, limit)
			}
		}()
		var err error
		if r, err = Run(cfg); err != nil {
			t.Fatal(err)
		}
	}()
	if c.err != nil {
		t.Fatalf("%s on %s: %v", c.Name(), cfg.Cluster.Name, c.err)
	}
	return r, c
}

// randomTrace is n jobs with Poisson arrivals, 1 to 16 GPUs (powers of two
// more often), heavy-tailed (Pareto, alpha 1.2) durations, a few of them 0.
func randomTrace(rng *rand.Rand, n int) *trace.Trace {
	models := []string{"", "", "vgg16", "resnet50", "lstm", "deepspeech"}
	tr := &trace.Trace{Name: "random"}
	at := 0.0
	for i := 0; i < n; i++ {
		at += rng.ExpFloat64() * 40
		gpus := 1 << rng.Intn(5)
		if rng.Intn(3) == 0 {
			gpus = 1 + rng.Intn(16)
		}
		d := math.Min(20*math.Pow(1-rng.Float64(), -1/1.2), 50000)
		if rng.Intn(40) == 0 {
			d = 0
		}
		tr.Jobs = append(tr.Jobs, trace.Job{ID: fmt.Sprintf("j%d", i), GPUs: gpus, Duration: math.Round(d), Submit: math.Round(at), Model: models[rng.Intn(len(models))]})
	}
	return tr
}

// randomCluster is 1 to 3 racks of 4- and 8-GPU nodes (each node group
// starts a rack). Clusters on which a job of at most 16 GPUs that fits the
// cluster could never be consolidated are avoided: the simulator then stalls
// (see TestUnconsolidatableJobDoesNotStall).
func randomCluster(t *testing.T, rng *rand.Rand) *cluster.Cluster {
	for {
		var groups []cluster.NodeGroup
		if n := rng.Intn(4); n > 0 {
			groups = append(groups, cluster.NodeGroup{Count: n, GPUsPerNode: 4, NodesPerRack: 1 + rng.Intn(n)})
		}
		if n := rng.Intn(4); n > 0 {
			groups = append(groups, cluster.NodeGroup{Count: n, GPUsPerNode: 8, NodesPerRack: 1 + rng.Intn(n)})
		}
		if len(groups) == 0 {
			continue
		}
		c, err := cluster.Mixed(fmt.Sprintf("random-%d", rng.Int()), groups...)
		if err != nil {
			t.Fatal(err)
		}
		racks := map[string]bool{}
		for _, n := range c.Nodes {
			racks[n.Rack] = true
		}
		if len(racks) <= 3 && consolidatable(c, 16) {
			return c
		}
	}
}

// consolidatable reports whether every gang of up to k GPUs that fits the
// empty cluster fits on ceil(gang / largest node) of its nodes.
func consolidatable(c *cluster.Cluster, k int) bool {
	sizes := make([]int, len(c.Nodes))
	largest := 0
	for i, n := range c.Nodes {
		sizes[i] = len(n.GPUs)
		largest = max(largest, sizes[i])
	}
	// Largest nodes first.
	for i := range sizes {
		for j := i + 1; j < len(sizes); j++ {
			if sizes[j] > sizes[i] {
				sizes[i], sizes[j] = sizes[j], sizes[i]
			}
		}
	}
	for g := 1; g <= min(k, c.TotalGPUs()); g++ {
		allowed, sum := (g+largest-1)/largest, 0
		for _, s := range sizes[:min(allowed, len(sizes))] {
			sum += s
		}
		if sum < g {
			return false
		}
	}
	return true
}

// TestPropertyRandomTraces runs random traces on random small clusters under
// every policy and checks what the Result must satisfy:
//
//   - every job finished, except those larger than the cluster, which never
//     started (so the run ended only when nothing else could happen);
//   - utilization samples lie in [0, TotalGPUs], in time order, and at every
//     round the running jobs hold at most TotalGPUs (checked);
//   - no job ran faster than full speed: JCT - Queue >= Duration, and
//     End >= Start >= Submit, Queue <= JCT;
//   - busy GPU-seconds (the integral of Util) equal the GPU-seconds the jobs
//     held, sum of GPUs x (JCT - Queue): the samples and the jobs agree.
func TestPropertyRandomTraces(t *testing.T) {
	trials, jobs := 6, 300
	if testing.Short() {
		trials, jobs = 2, 150
	}
	if *propertyTrials > 0 {
		trials = *propertyTrials
	}
	for _, name := range rankingNames() {
		t.Run(name, func(t *testing.T) {
			for trial := 0; trial < trials; trial++ {
				seed := int64(1000*trial + len(name))
				rng := rand.New(rand.NewSource(seed))
				tr := randomTrace(rng, jobs)
				cl := randomCluster(t, rng)
				// Thresholds / 16 GPUs > checkpoint + restore, so a promoted
				// job progresses before it is demoted again (see
				// TestPromotionLivelock).
				settings := []string{}
				if name == "tiresias-las" || name == "tiresias-gittins" {
					settings = []string{"tiresias.queues=1000,20000", "tiresias.promote_knob=" + []string{"inf", "2", "8"}[trial%3]}
				}
				p := newPolicy(t, name, settings...)
				cost := float64(rng.Intn(2)) * 15
				r, _ := runChecked(t, Config{Trace: tr, Cluster: cl, Policy: p, Seed: seed, CheckpointCost: cost, RestoreCost: cost}, 200000)
				checkResult(t, fmt.Sprintf("%s seed %d on %s (%d GPUs)", name, seed, cl.Name, cl.TotalGPUs()), tr, r)
			}
		})
	}
}

func checkResult(t *testing.T, what string, tr *trace.Trace, r *Result) {
	t.Helper()
	const eps = 1e-6
	if len(r.Jobs) != len(tr.Jobs) {
		t.Fatalf("%s: %d job results for %d jobs", what, len(r.Jobs), len(tr.Jobs))
	}
	// A sweep's later phases never start after a phase with a job larger
	// than the cluster (it never finishes).
	blocked := map[string]int{} // app -> first phase that cannot finish
	for _, tj := range tr.Jobs {
		if tj.Phase > 0 && tj.GPUs > r.TotalGPUs {
			if b, ok := blocked[tj.App]; !ok || tj.Phase < b {
				blocked[tj.App] = tj.Phase
			}
		}
	}
	held := 0.0
	for i, j := range r.Jobs {
		tj := tr.Jobs[i]
		// A later phase of a sweep is submitted when its app's previous
		// phase has finished (apps.go), not at its trace time.
		submitOK := j.Submit == tj.Submit || (tj.Phase > 1 && j.Submit >= tj.Submit)
		if j.ID != tj.ID || j.GPUs != tj.GPUs || !submitOK || j.Duration != tj.Duration {
			t.Fatalf("%s: result %d is %+v for trace job %+v", what, i, j, tj)
		}
		if j.GPUs > r.TotalGPUs {
			if j.Started || j.Finished {
				t.Errorf("%s: %s needs %d GPUs of %d but started=%v finished=%v", what, j.ID, j.GPUs, r.TotalGPUs, j.Started, j.Finished)
			}
			continue
		}
		if b, ok := blocked[tj.App]; ok && tj.Phase > b {
			if j.Started {
				t.Errorf("%s: %s of phase %d started after phase %d, which cannot finish", what, j.ID, tj.Phase, b)
			}
			continue
		}
		if !j.Finished || !j.Started {
			t.Errorf("%s: %s (%d GPUs, %g s, submitted %g) started=%v finished=%v, though it fits", what, j.ID, j.GPUs, j.Duration, j.Submit, j.Started, j.Finished)
			continue
		}
		// The simulator admits arrivals up to 1e-9 s early (its event
		// tolerance), so Start may precede Submit by that much.
		if !(j.End >= j.Start && j.Start >= j.Submit-eps) {
			t.Errorf("%s: %s submit %g start %g end %g out of order", what, j.ID, j.Submit, j.Start, j.End)
		}
		if j.Queue < -eps || j.Queue > j.JCT()+eps {
			t.Errorf("%s: %s queued %g of a JCT of %g", what, j.ID, j.Queue, j.JCT())
		}
		if ran := j.JCT() - j.Queue; ran < j.Duration-eps {
			t.Errorf("%s: %s held GPUs %g s for %g s of work: faster than full speed", what, j.ID, ran, j.Duration)
		}
		if j.Queue < j.Start-j.Submit-eps {
			t.Errorf("%s: %s queued %g but first started %g after submission", what, j.ID, j.Queue, j.Start-j.Submit)
		}
		held += float64(j.GPUs) * (j.JCT() - j.Queue)
	}
	busy := 0.0
	for i, u := range r.Util {
		if u.Busy < 0 || u.Busy > r.TotalGPUs {
			t.Errorf("%s: utilization sample %+v outside [0, %d]", what, u, r.TotalGPUs)
		}
		if i > 0 && u.T < r.Util[i-1].T {
			t.Errorf("%s: utilization samples out of order: %+v after %+v", what, u, r.Util[i-1])
		}
		next := 0.0
		if i+1 < len(r.Util) {
			next = r.Util[i+1].T
		} else {
			// The last sample holds until the last completion.
			for _, j := range r.Jobs {
				if j.Finished {
					next = math.Max(next, j.End)
				}
			}
			next = math.Max(next, u.T)
		}
		busy += float64(u.Busy) * (next - u.T)
	}
	if math.Abs(busy-held) > 1e-6*math.Max(1, held) {
		t.Errorf("%s: utilization integrates to %g GPU-s, the jobs held %g", what, busy, held)
	}
}
