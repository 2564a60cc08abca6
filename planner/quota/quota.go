// Package quota is the GPU-quota baseline of virtual clusters (the HiveD
// paper's "quota-based" sharing): each VC may hold at most its quota of GPUs,
// placed anywhere in the cluster, with no cells of its own.
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
)

// Placer caps each VC's GPUs at its quota and places jobs anywhere in the
// cluster by its Fit; core.Placer.
type Placer struct {
	fit         Fit
	quota, used map[string]int
	held        map[core.JobKey]held
}

var _ core.Placer = (*Placer)(nil)

type held struct {
	vc   string
	gpus int
}

// New returns a best-fit placer with each VC's quota in GPUs.
func New(quota map[string]int) *Placer { return NewFit(quota, BestFit) }

// NewFit returns a placer with each VC's quota in GPUs and the given fit.
func NewFit(quota map[string]int, fit Fit) *Placer {
	q := &Placer{fit: fit, quota: map[string]int{}, used: map[string]int{}, held: map[core.JobKey]held{}}
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
	if q.fit == FirstFit {
		g, ok = firstFit(j, free)
	} else {
		g, ok = free.PlaceJob(j, true)
	}
	if !ok {
		return core.Grant{}, false, fmt.Sprintf("no %s placement for %d GPUs (%d free)", q.fit, j.GPUs, free.Total())
	}
	q.used[j.VC] += j.GPUs
	q.held[j.Key] = held{j.VC, j.GPUs}
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

// firstFit places j on the first node (in name order) with j.GPUs free
// GPUs, else on the first free GPUs of the cluster in node order, taking
// them from free.
func firstFit(j *core.Job, free *core.FreeGPUs) (core.Grant, bool) {
	if j.GPUs <= 0 || j.GPUs > free.Total() {
		return core.Grant{}, false
	}
	nodes := free.FreeNodes()
	g := core.Grant{Job: j.Key}
	for _, n := range nodes {
		if len(n.GPUs) >= j.GPUs {
			g.Node = n.ID
			for _, x := range n.GPUs[:j.GPUs] {
				g.GPUs = append(g.GPUs, x.ID)
			}
			return g, free.Take(g)
		}
	}
	for _, n := range nodes {
		for _, x := range n.GPUs {
			if len(g.GPUs) < j.GPUs {
				g.GPUs = append(g.GPUs, x.ID)
			}
		}
	}
	return g, free.Take(g)
}

// Release tells the placer a job stopped.
func (q *Placer) Release(job core.JobKey) {
	if h, ok := q.held[job]; ok {
		q.used[h.vc] -= h.gpus
		delete(q.held, job)
	}
}
