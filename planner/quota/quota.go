// Package quota is the GPU-quota baseline of virtual clusters (the HiveD
// paper's "quota-based" sharing): each VC may hold at most its quota of GPUs,
// placed anywhere in the cluster, with no cells of its own.
package quota

import (
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
)

// Placer caps each VC's GPUs at its quota and places jobs anywhere in the
// cluster (consolidated, as the core places them); core.Placer.
type Placer struct {
	quota, used map[string]int
	held        map[core.JobKey]held
}

var _ core.Placer = (*Placer)(nil)

type held struct {
	vc   string
	gpus int
}

// New returns a placer with each VC's quota in GPUs.
func New(quota map[string]int) *Placer {
	q := &Placer{quota: map[string]int{}, used: map[string]int{}, held: map[core.JobKey]held{}}
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
	g, ok := free.PlaceJob(j, true)
	if !ok {
		return core.Grant{}, false, fmt.Sprintf("no consolidated placement for %d GPUs (%d free)", j.GPUs, free.Total())
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

// Release tells the placer a job stopped.
func (q *Placer) Release(job core.JobKey) {
	if h, ok := q.held[job]; ok {
		q.used[h.vc] -= h.gpus
		delete(q.held, job)
	}
}
