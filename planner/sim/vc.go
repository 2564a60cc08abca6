package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

// AnomalyTolerance is how much longer (seconds) a VC's average queueing
// delay in the shared cluster may be than in its private cluster before
// it counts as a sharing anomaly: simulated times are sums of floats.
const AnomalyTolerance = 1e-3

// VCResult is one virtual cluster's outcome in a shared run and in its
// private cluster. Averages are over the VC's finished jobs of each run
// (NaN when none finished).
type VCResult struct {
	Name string
	// GPUs is the VC's share: the GPUs of its cells.
	GPUs            int
	Jobs            int
	Finished        int
	PrivateFinished int
	AvgQueue        float64
	PrivateAvgQueue float64
	AvgJCT          float64
	PrivateAvgJCT   float64
	ExcessQueue     float64 // AvgQueue - PrivateAvgQueue
	Anomaly         bool    // ExcessQueue > AnomalyTolerance
	// P95Queue and PrivateP95Queue are the nearest-rank 95th percentiles
	// of the finished jobs' queueing delays (NaN when none finished).
	P95Queue, PrivateP95Queue float64
	// Preemptions counts the preemptions of the VC's jobs in the shared
	// run (with overflow: its opportunistic jobs evicted for guaranteed
	// ones).
	Preemptions int
}

// VCRun is how RunVCs shares the cluster.
type VCRun struct {
	// Config is the shared run: trace, cluster, costs, seed. Its Policy is
	// ignored; NewPolicy makes one per run (policies may keep state).
	Config
	NewPolicy func() (core.Policy, error)
	VCs       *hived.Config
	// Mode is how the virtual clusters share the cluster: one of
	// stack.Placements, built by stack.NewPlacer as the live planner
	// builds its own.
	Mode stack.Placement
}

// RunVCs replays the trace on the shared cluster with its jobs in virtual
// clusters (a job's VC is its trace VC), each VC's queue run by the policy,
// and on each VC's private cluster (its cells alone, HiveD-placed) with
// only its own jobs; it returns the shared run with Result.VCs comparing
// the two.
//
// All these runs model the cluster as one rack (Config.OneRack): a VC's
// private cluster is its cells with no rack layout of their own, so a job
// over several of its cells would otherwise run at a different speed there
// than in the shared cluster, and the comparison would measure the rack
// model rather than sharing.
func RunVCs(run VCRun) (*Result, error) {
	run.OneRack = true
	mode := run.Mode
	if mode == stack.PlaceFree || !slices.Contains(stack.Placements(), mode) {
		return nil, fmt.Errorf("sim: virtual-cluster mode %q: want one of %v", run.Mode, stack.Placements())
	}
	wall := time.Now()
	shared, err := hived.New(run.Cluster.Nodes, run.VCs)
	if err != nil {
		return nil, fmt.Errorf("sim: virtual clusters on %s: %w", run.Cluster.Name, err)
	}
	byVC := map[string][]trace.Job{}
	for _, j := range run.Trace.Jobs {
		byVC[j.VC] = append(byVC[j.VC], j)
	}
	vcs := shared.VCs()
	known := map[string]bool{}
	for _, v := range vcs {
		known[v.Name] = true
	}
	for name, jobs := range byVC {
		if !known[name] {
			return nil, fmt.Errorf("sim: trace %s has %d jobs of virtual cluster %q, which the VC config does not define", run.Trace.Name, len(jobs), name)
		}
	}

	// Private baselines.
	private := map[string]*Result{}
	for _, v := range vcs {
		pc, nodes, err := shared.Private(v.Name)
		if err != nil {
			return nil, err
		}
		if pc == nil || len(byVC[v.Name]) == 0 {
			continue
		}
		pol, err := run.NewPolicy()
		if err != nil {
			return nil, err
		}
		sub := *run.Trace
		sub.Name = run.Trace.Name + "/" + v.Name
		sub.Jobs = byVC[v.Name]
		cfg := run.Config
		cfg.Trace, cfg.Policy, cfg.Progress = &sub, pol, nil
		cfg.Cluster = &cluster.Cluster{Name: "private-" + v.Name, Nodes: nodes}
		cfg.Placer = hived.NewPlacer(pc)
		r, err := Run(cfg)
		if err != nil {
			return nil, fmt.Errorf("sim: private cluster of %s: %w", v.Name, err)
		}
		private[v.Name] = r
	}

	// The shared run.
	pol, err := run.NewPolicy()
	if err != nil {
		return nil, err
	}
	cfg := run.Config
	cfg.Policy = pol
	if cfg.Placer, err = stack.NewPlacer(mode, run.VCs, run.Cluster.Nodes); err != nil {
		return nil, fmt.Errorf("sim: virtual clusters on %s: %w", run.Cluster.Name, err)
	}
	cfg.Overflow = mode.Overflows()
	res, err := Run(cfg)
	if err != nil {
		return nil, err
	}
	res.VCMode = string(run.Mode)
	privQ, privN := 0.0, 0
	for _, v := range vcs {
		vr := VCResult{Name: v.Name, GPUs: v.GPUs}
		vr.Finished, vr.AvgQueue, vr.AvgJCT = vcStats(res.Jobs, v.Name)
		vr.P95Queue, vr.Preemptions = vcQueueP95(res.Jobs, v.Name)
		vr.Jobs = len(byVC[v.Name])
		vr.PrivateAvgQueue, vr.PrivateAvgJCT, vr.PrivateP95Queue = math.NaN(), math.NaN(), math.NaN()
		if p := private[v.Name]; p != nil {
			vr.PrivateFinished, vr.PrivateAvgQueue, vr.PrivateAvgJCT = vcStats(p.Jobs, v.Name)
			vr.PrivateP95Queue, _ = vcQueueP95(p.Jobs, v.Name)
			if vr.PrivateFinished > 0 {
				privQ += vr.PrivateAvgQueue * float64(vr.PrivateFinished)
				privN += vr.PrivateFinished
			}
		}
		vr.ExcessQueue = vr.AvgQueue - vr.PrivateAvgQueue
		if vr.Finished > 0 && vr.PrivateFinished > 0 && vr.ExcessQueue > AnomalyTolerance {
			vr.Anomaly = true
			res.SharingAnomalies++
		}
		if !math.IsNaN(vr.ExcessQueue) {
			res.MaxExcessQueue = math.Max(res.MaxExcessQueue, vr.ExcessQueue)
		}
		res.VCs = append(res.VCs, vr)
	}
	res.PrivateAvgQueue = math.NaN()
	if privN > 0 {
		res.PrivateAvgQueue = privQ / float64(privN)
	}
	res.WallSeconds = time.Since(wall).Seconds()
	return res, nil
}

// vcQueueP95 is the nearest-rank 95th percentile of the queueing delays of
// a VC's finished jobs (NaN when none finished) and the preemptions of all
// its jobs.
func vcQueueP95(jobs []JobResult, vc string) (p95 float64, preemptions int) {
	var q []float64
	for _, j := range jobs {
		if j.VC != vc {
			continue
		}
		preemptions += j.Preemptions
		if j.Finished {
			q = append(q, j.Queue)
		}
	}
	if len(q) == 0 {
		return math.NaN(), preemptions
	}
	slices.Sort(q)
	return q[int(math.Ceil(0.95*float64(len(q))))-1], preemptions
}

// vcStats are the finished jobs of a VC, their average queueing delay and
// JCT.
func vcStats(jobs []JobResult, vc string) (finished int, avgQueue, avgJCT float64) {
	q, c := 0.0, 0.0
	for _, j := range jobs {
		if j.VC == vc && j.Finished {
			finished++
			q += j.Queue
			c += j.JCT()
		}
	}
	if finished == 0 {
		return 0, math.NaN(), math.NaN()
	}
	return finished, q / float64(finished), c / float64(finished)
}

// vcCounter wraps a run's Placer to count the virtual clusters with queued
// jobs, which the engine keeps up to date as jobs arrive, start and are
// preempted: Decide stops looking once that many queues are blocked.
type vcCounter struct {
	core.Placer
	queued  map[string]int
	waiting int
}

func (c *vcCounter) WaitingVCs() int { return c.waiting }

// add counts n more (or fewer) queued jobs of vc.
func (c *vcCounter) add(vc string, n int) {
	before := c.queued[vc]
	c.queued[vc] = before + n
	switch {
	case before == 0 && before+n > 0:
		c.waiting++
	case before > 0 && before+n == 0:
		c.waiting--
	}
}
