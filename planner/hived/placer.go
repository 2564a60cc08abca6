package hived

import (
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
)

// Placer places the decision core's jobs with a Cluster (core.Placer):
// guaranteed jobs (priority >= 0) in their VC's cells, opportunistic ones
// (priority -1) on idle cells. The simulator and the live planner both use
// it; whoever applies a decision tells it of the jobs that stop (Release).
type Placer struct {
	c    *Cluster
	gpus map[string]int // each VC's GPUs
	// equalParts keeps a gang that a node can hold on one node, and takes
	// a larger one only in equal parts on whole nodes (the live planner
	// runs such a gang as one task group: core.ClusterIndex.Shape).
	equalParts bool
}

var _ core.Placer = (*Placer)(nil)

// NewPlacer places jobs with c.
func NewPlacer(c *Cluster) *Placer {
	h := &Placer{c: c, gpus: map[string]int{}}
	for _, v := range c.VCs() {
		h.gpus[v.Name] = v.GPUs
	}
	return h
}

// SetEqualParts places gangs as the live planner can run them: on one node
// when a node can hold the gang, else in equal parts, one per node.
func (h *Placer) SetEqualParts(on bool) { h.equalParts = on }

// oneNode is whether j's gang must stay on one node.
func (h *Placer) oneNode(j *core.Job, free *core.FreeGPUs) bool {
	return h.equalParts && j.GPUs <= free.Largest()
}

// badShape says why a (multi-node) allocation cannot run live under equal
// parts, "" when it can.
func (h *Placer) badShape(a Allocation, free *core.FreeGPUs) string {
	if !h.equalParts || len(a.Grants) <= 1 || free.Pinnable(a.Grant()) {
		return ""
	}
	sizes := make([]int, len(a.Grants))
	for i, g := range a.Grants {
		sizes[i] = len(g.GPUs)
	}
	return fmt.Sprintf("hived's free cells would split the gang %v across nodes; a multi-node gang runs in equal parts, one per node (waiting for whole cells)", sizes)
}

// Cluster is the cells the placer allocates from.
func (h *Placer) Cluster() *Cluster { return h.c }

// Place implements core.Placer: HiveD chooses the GPUs, and the jobs it
// evicts for them (opportunistic jobs, or lower-priority jobs of the VC)
// are passed to preempt.
func (h *Placer) Place(j *core.Job, free *core.FreeGPUs, preempt func(core.JobKey)) (core.Grant, bool, string) {
	a, err := h.c.Allocate(Request{Job: j.Key, VC: j.VC, GPUs: j.GPUs, Priority: j.Priority, SingleNode: h.oneNode(j, free)})
	if err != nil {
		return core.Grant{}, false, err.Error()
	}
	if why := h.badShape(a, free); why != "" {
		// Its victims were released in the cells for this round only (the
		// live planner rebuilds the cells every round); none is preempted.
		h.c.Release(j.Key)
		return core.Grant{}, false, why
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

// Overflow implements core.Placer: a guaranteed job that does not fit its
// VC's cells runs as an opportunistic job on idle GPUs (HiveD's
// low-priority jobs), which a guaranteed job that needs them preempts; it
// preempts nothing itself. The job keeps its priority in the core; HiveD
// holds it as opportunistic until it stops.
func (h *Placer) Overflow(j *core.Job, free *core.FreeGPUs) (core.Grant, bool, string) {
	a, err := h.c.Allocate(Request{Job: j.Key, VC: j.VC, GPUs: j.GPUs, Priority: Opportunistic, SingleNode: h.oneNode(j, free)})
	if err != nil {
		return core.Grant{}, false, err.Error()
	}
	if why := h.badShape(a, free); why != "" {
		h.c.Release(j.Key)
		return core.Grant{}, false, why
	}
	g := a.Grant()
	if !free.Take(g) {
		h.c.Release(j.Key)
		return core.Grant{}, false, fmt.Sprintf("hived chose idle GPUs %v, which are not free this round", g.GPUs)
	}
	return g, true, ""
}

// Release tells HiveD a job stopped.
func (h *Placer) Release(job core.JobKey) { h.c.Release(job) }

// Guaranteed implements core.Placer: the GPUs of the VC's cells.
func (h *Placer) Guaranteed(vc string) int { return h.gpus[vc] }

// SetVictimCost passes preempt.victims=least-lost-work's costs to HiveD.
func (h *Placer) SetVictimCost(cost func(core.JobKey) float64) { h.c.SetVictimCost(cost) }

// Never implements core.Placer: a guaranteed job larger than its VC's
// cells, or of an unknown VC, can never be placed.
func (h *Placer) Never(j *core.Job) (bool, string) {
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

// WaitingVCs implements core.Placer: unknown here (0); a caller that counts
// the VCs with queued jobs answers it (the simulator's engine does).
func (*Placer) WaitingVCs() int { return 0 }
