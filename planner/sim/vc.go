package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/trace"
)

// The ways RunVCs shares a cluster among virtual clusters.
const (
	// VCModeHived gives each VC its cells, bound by HiveD's buddy
	// allocation (package hived).
	VCModeHived = "hived"
	// VCModeQuota caps each VC at its cells' GPU count, placed anywhere
	// (the "quota" baseline of the HiveD paper).
	VCModeQuota = "quota"
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
}

// VCRun is how RunVCs shares the cluster.
type VCRun struct {
	// Config is the shared run: trace, cluster, costs, seed. Its Policy is
	// ignored; NewPolicy makes one per run (policies may keep state).
	Config
	NewPolicy func() (core.Policy, error)
	VCs       *hived.Config
	// Mode is VCModeHived or VCModeQuota.
	Mode string
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
	if run.Mode != VCModeHived && run.Mode != VCModeQuota {
		return nil, fmt.Errorf("sim: virtual-cluster mode %q: want %q or %q", run.Mode, VCModeHived, VCModeQuota)
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
		cfg.Placer = newHivedPlacer(pc)
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
	if run.Mode == VCModeHived {
		cfg.Placer = newHivedPlacer(shared)
	} else {
		q := newQuotaPlacer()
		for _, v := range vcs {
			q.quota[v.Name] = v.GPUs
		}
		cfg.Placer = q
	}
	res, err := Run(cfg)
	if err != nil {
		return nil, err
	}
	res.VCMode = run.Mode
	for _, v := range vcs {
		vr := VCResult{Name: v.Name, GPUs: v.GPUs}
		vr.Finished, vr.AvgQueue, vr.AvgJCT = vcStats(res.Jobs, v.Name)
		vr.Jobs = len(byVC[v.Name])
		vr.PrivateAvgQueue, vr.PrivateAvgJCT = math.NaN(), math.NaN()
		if p := private[v.Name]; p != nil {
			vr.PrivateFinished, vr.PrivateAvgQueue, vr.PrivateAvgJCT = vcStats(p.Jobs, v.Name)
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
	res.WallSeconds = time.Since(wall).Seconds()
	return res, nil
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

// hivedPlacer places jobs in their VC's cells (guaranteed jobs, priority
// >= 0) or on idle cells (opportunistic, priority -1).
type hivedPlacer struct {
	c    *hived.Cluster
	gpus map[string]int // each VC's GPUs
}

func newHivedPlacer(c *hived.Cluster) hivedPlacer {
	h := hivedPlacer{c: c, gpus: map[string]int{}}
	for _, v := range c.VCs() {
		h.gpus[v.Name] = v.GPUs
	}
	return h
}

func (h hivedPlacer) Place(j *core.Job, free *core.FreeGPUs, preempt func(core.JobKey)) (core.Grant, bool, string) {
	a, err := h.c.Allocate(hived.Request{Job: j.Key, VC: j.VC, GPUs: j.GPUs, Priority: j.Priority})
	if err != nil {
		return core.Grant{}, false, err.Error()
	}
	for _, v := range a.Preempt { // already released in the cells
		preempt(v)
	}
	g := a.Grant()
	if !free.Take(g) {
		h.c.Release(j.Key)
		return core.Grant{}, false, fmt.Sprintf("hived chose GPUs %v, which are not free this round", g.GPUs)
	}
	return g, true, ""
}

func (h hivedPlacer) Release(job core.JobKey) { h.c.Release(job) }

// SetVictimCost passes preempt.victims=least-lost-work's costs to HiveD.
func (h hivedPlacer) SetVictimCost(cost func(core.JobKey) float64) { h.c.SetVictimCost(cost) }

// Never: a guaranteed job larger than its VC's cells, or of an unknown VC.
func (h hivedPlacer) Never(j *core.Job) (bool, string) {
	if j.Priority < 0 {
		return false, ""
	}
	gpus, ok := h.gpus[j.VC]
	switch {
	case !ok:
		return true, fmt.Sprintf("virtual cluster %q is not configured", j.VC)
	case j.GPUs > gpus:
		return true, fmt.Sprintf("needs %d GPUs; virtual cluster %q has %d", j.GPUs, j.VC, gpus)
	}
	return false, ""
}

// WaitingVCs is answered by the engine (see vcCounter).
func (hivedPlacer) WaitingVCs() int { return 0 }

// quotaPlacer caps each VC's GPUs at its quota and places jobs anywhere in
// the cluster (consolidated, as the core places them).
type quotaPlacer struct {
	quota, used map[string]int
	held        map[core.JobKey]heldGPUs
}

type heldGPUs struct {
	vc   string
	gpus int
}

func newQuotaPlacer() *quotaPlacer {
	return &quotaPlacer{quota: map[string]int{}, used: map[string]int{}, held: map[core.JobKey]heldGPUs{}}
}

func (q *quotaPlacer) Place(j *core.Job, free *core.FreeGPUs, _ func(core.JobKey)) (core.Grant, bool, string) {
	quota, ok := q.quota[j.VC]
	switch {
	case !ok:
		return core.Grant{}, false, fmt.Sprintf("virtual cluster %q has no quota", j.VC)
	case q.used[j.VC]+j.GPUs > quota:
		return core.Grant{}, false, fmt.Sprintf("virtual cluster %q uses %d of its %d GPUs; %d more would exceed it", j.VC, q.used[j.VC], quota, j.GPUs)
	}
	g, ok := free.PlaceJob(j, true)
	if !ok {
		return core.Grant{}, false, fmt.Sprintf("no consolidated placement for %d GPUs (%d free)", j.GPUs, free.Total())
	}
	q.used[j.VC] += j.GPUs
	q.held[j.Key] = heldGPUs{j.VC, j.GPUs}
	return g, true, ""
}

// WaitingVCs is answered by the engine (see vcCounter).
func (*quotaPlacer) WaitingVCs() int { return 0 }

// Never: a job larger than its VC's quota, or of a VC without one.
func (q *quotaPlacer) Never(j *core.Job) (bool, string) {
	quota, ok := q.quota[j.VC]
	switch {
	case !ok:
		return true, fmt.Sprintf("virtual cluster %q has no quota", j.VC)
	case j.GPUs > quota:
		return true, fmt.Sprintf("needs %d GPUs; virtual cluster %q's quota is %d", j.GPUs, j.VC, quota)
	}
	return false, ""
}

func (q *quotaPlacer) Release(job core.JobKey) {
	if h, ok := q.held[job]; ok {
		q.used[h.vc] -= h.gpus
		delete(q.held, job)
	}
}

// vcCounter wraps a run's Placer to count the virtual clusters with queued
// jobs, which the engine keeps up to date as jobs arrive, start and are
// preempted: Decide stops looking once that many queues are blocked.
type vcCounter struct {
	VCPlacer
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
