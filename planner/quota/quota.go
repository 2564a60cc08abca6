// Package quota is the GPU-quota baseline of virtual clusters (the HiveD
// paper's "quota-based" sharing): each VC may hold at most its quota of GPUs,
// placed anywhere in the cluster, with no cells of its own. The placement
// is a Fit: the core's best fit (BestFit, standing for Tiresias's
// consolidation), YARN-CS's first fit (FirstFit) or Gandiva's job-size
// affinity (Affinity), the baselines the HiveD paper compared with
// (docs/hived.md). Quotas are caps: nothing overflows them.
package quota

import (
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
)

// Fit is how a quota baseline places a job on the cluster's free GPUs.
type Fit string

const (
	// BestFit is the core's own placement: the fullest node that holds the
	// gang, deepest cell first, gangs over as few nodes as possible.
	BestFit Fit = "best-fit"
	// FirstFit is YARN's Capacity Scheduler as the HiveD paper ran it: no
	// topology preference, the first node (in name order) with enough free
	// GPUs, else the first free GPUs of the cluster in node order.
	FirstFit Fit = "first-fit"
	// Affinity is Gandiva's placement: a job goes to a node that runs
	// only jobs of its size (affinity), else to a node running nothing,
	// else to the node with the most free GPUs; a gang larger than a
	// node takes idle nodes first.
	Affinity Fit = "affinity"
)

// Placer caps each VC's GPUs at its quota and places jobs anywhere in the
// cluster by its Fit; core.Placer.
type Placer struct {
	fit         Fit
	quota, used map[string]int
	held        map[core.JobKey]held
	// sizes counts, per node, the placer's running jobs by GPU count
	// (Affinity).
	sizes map[string]map[int]int
}

var _ core.Placer = (*Placer)(nil)

// Guaranteed implements core.Placer: the VC's quota.
func (q *Placer) Guaranteed(vc string) int { return q.quota[vc] }

type held struct {
	vc    string
	gpus  int
	nodes []string // Affinity: the nodes of its GPUs
}

// New returns a best-fit placer with each VC's quota in GPUs.
func New(quota map[string]int) *Placer { return NewFit(quota, BestFit) }

// NewFit returns a placer with each VC's quota in GPUs and the given fit.
func NewFit(quota map[string]int, fit Fit) *Placer {
	q := &Placer{fit: fit, quota: map[string]int{}, used: map[string]int{}, held: map[core.JobKey]held{}, sizes: map[string]map[int]int{}}
	for vc, n := range quota {
		q.quota[vc] = n
	}
	return q
}

// Place implements core.Placer.
func (q *Placer) Place(j *core.Job, free *core.FreeGPUs, _ func(core.JobKey)) (core.Grant, bool, string) {
	quota, ok := q.quota[j.VC]
	switch {
	case !ok:
		return core.Grant{}, false, fmt.Sprintf("virtual cluster %q has no quota", j.VC)
	case q.used[j.VC]+j.GPUs > quota:
		return core.Grant{}, false, fmt.Sprintf("virtual cluster %q uses %d of its %d GPUs; %d more would exceed it", j.VC, q.used[j.VC], quota, j.GPUs)
	}
	var g core.Grant
	switch q.fit {
	case FirstFit:
		g, ok = firstFit(j, free)
	case Affinity:
		g, ok = q.affinity(j, free)
	default:
		g, ok = free.PlaceJob(j, true)
	}
	if !ok {
		return core.Grant{}, false, fmt.Sprintf("no %s placement for %d GPUs (%d free)", q.fit, j.GPUs, free.Total())
	}
	h := held{vc: j.VC, gpus: j.GPUs}
	if q.fit == Affinity {
		h.nodes = nodesOf(g, free)
		for _, n := range h.nodes {
			if q.sizes[n] == nil {
				q.sizes[n] = map[int]int{}
			}
			q.sizes[n][j.GPUs]++
		}
	}
	q.used[j.VC] += j.GPUs
	q.held[j.Key] = h
	return g, true, ""
}

// WaitingVCs implements core.Placer: unknown here (0); a caller that counts
// the VCs with queued jobs answers it.
func (*Placer) WaitingVCs() int { return 0 }

// Never implements core.Placer: a job larger than its VC's quota, or of a
// VC without one.
func (q *Placer) Never(j *core.Job) (bool, string) {
	quota, ok := q.quota[j.VC]
	switch {
	case !ok:
		return true, fmt.Sprintf("virtual cluster %q has no quota", j.VC)
	case j.GPUs > quota:
		return true, fmt.Sprintf("needs %d GPUs; virtual cluster %q's quota is %d", j.GPUs, j.VC, quota)
	}
	return false, ""
}

// Overflow implements core.Placer: a quota is a cap, so nothing overflows.
func (q *Placer) Overflow(j *core.Job, _ *core.FreeGPUs) (core.Grant, bool, string) {
	return core.Grant{}, false, fmt.Sprintf("virtual cluster %q: quotas do not overflow", j.VC)
}

// Release tells the placer a job stopped.
// SetVictimCost implements core.Placer: quotas preempt no running job.
func (q *Placer) SetVictimCost(func(core.JobKey) float64) {}

func (q *Placer) Release(job core.JobKey) {
	if h, ok := q.held[job]; ok {
		q.used[h.vc] -= h.gpus
		for _, n := range h.nodes {
			if q.sizes[n][h.gpus]--; q.sizes[n][h.gpus] == 0 {
				delete(q.sizes[n], h.gpus)
			}
		}
		delete(q.held, job)
	}
}
