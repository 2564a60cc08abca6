package hived

import (
	"sort"

	"github.com/themis-nomad/themis/planner/core"
)

// Reconfigure switches to a new VC configuration on the same nodes (with
// the GPUs' current health) and keeps the running jobs that still fit where
// they run: a guaranteed job stays if its VC still exists and its GPUs can
// be bound to free virtual GPUs of the VC (binding the VC's cells to the
// physical cells the job runs in, as long as the other VCs' cells stay
// placeable: first each of the VC's busy cells to the physical cell it was
// bound to, if the VC still has a cell of that type, so that the same
// configuration keeps every job); an opportunistic job stays on its GPUs. Guaranteed jobs are
// kept highest priority, then oldest, first; opportunistic jobs after them.
// It returns the jobs that no longer fit, sorted: they are released and the
// caller must stop them. If cfg is invalid or infeasible, it returns the
// error and changes nothing.
func (c *Cluster) Reconfigure(cfg *Config) (evicted []core.JobKey, err error) {
	nodes := make([]core.Node, len(c.nodes))
	for i, n := range c.nodes {
		n.Schedulable = true
		n.GPUs = append([]core.GPU(nil), n.GPUs...)
		for k := range n.GPUs {
			if l := c.gpu(n.GPUs[k].ID); l != nil {
				n.GPUs[k].Healthy = l.healthy
			}
		}
		nodes[i] = n
	}
	nc, err := New(nodes, cfg)
	if err != nil {
		return nil, err
	}
	jobs := make([]*job, 0, len(c.jobs))
	for _, j := range c.jobs {
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(a, b int) bool {
		ja, jb := jobs[a], jobs[b]
		if ja.guaranteed() != jb.guaranteed() {
			return ja.guaranteed()
		}
		if ja.prio != jb.prio {
			return ja.prio > jb.prio
		}
		return ja.seq < jb.seq
	})
	// First the VCs' busy cells where they are, when the VC still has a
	// cell of the type; then the jobs; then unbind what no job kept.
	for _, v := range c.vcs {
		nv := nc.vcByName[v.name]
		if nv == nil {
			continue
		}
		for _, top := range v.tops {
			if top.pinned || top.used == 0 {
				continue
			}
			q := nc.named(top.bound.name)
			ntop := nv.unboundTop(q.typ)
			if ntop == nil || !nc.takeCell(q) {
				continue
			}
			nc.attachTop(ntop, q)
			if !nc.feasible() {
				nc.unbindTop(ntop)
			}
		}
	}
	for _, j := range jobs {
		ids := make([]string, len(j.phys))
		for i, p := range j.phys {
			ids[i] = p.name
		}
		if nc.adopt(&job{key: j.key, vcName: j.vcName, prio: j.prio, seq: j.seq}, ids, nil) != nil {
			evicted = append(evicted, j.key)
		}
	}
	for _, v := range nc.vcs {
		for _, top := range v.tops {
			if top.bound != nil && !top.pinned && top.used == 0 {
				nc.unbindTop(top)
			}
		}
	}
	nc.seq = c.seq
	*c = *nc
	sortKeys(evicted)
	return evicted, nil
}

// unboundTop is the VC's first unbound (so not pinned) top cell of type t.
func (v *vc) unboundTop(t *cellType) *cell {
	if t == nil {
		return nil
	}
	for _, top := range v.tops {
		if top.typ == t && top.bound == nil {
			return top
		}
	}
	return nil
}

// feasible reports whether the VCs' unbound cells fit in the free cells.
func (c *Cluster) feasible() bool {
	nt := len(c.types)
	count, left := c.scratch(0, nt), c.scratch(1, nt)
	c.poolCounts(count)
	return c.carve(count, c.demand, left) < 0
}
