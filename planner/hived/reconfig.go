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
			if l := c.gpus[n.GPUs[k].ID]; l != nil {
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
			q := nc.byName[top.bound.name]
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
		if !nc.adopt(j) {
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

// adopt records an old cluster's job on the same GPUs of this one; it
// reports false, changing nothing, when the job does not fit there.
func (c *Cluster) adopt(old *job) bool {
	phys := make([]*cell, len(old.phys))
	for i, p := range old.phys {
		q := c.gpus[p.name]
		if q == nil || q.job != nil {
			return false
		}
		phys[i] = q
	}
	j := &job{key: old.key, vcName: old.vcName, prio: old.prio, seq: old.seq, phys: phys}
	if old.guaranteed() {
		v := c.vcByName[old.vcName]
		if v == nil {
			return false
		}
		virt, ok := c.bindAt(v, phys)
		if !ok {
			return false
		}
		j.v, j.virt = v, virt
		for _, l := range virt {
			o := vleafState(l)
			l.job = j
			vchange(l, o)
		}
		v.jobs[j.key] = j
	}
	for _, p := range phys {
		o := pleafState(p)
		p.job = j
		pchange(p, o)
	}
	c.jobs[j.key] = j
	return true
}

// bindAt binds free virtual GPUs of v to the given physical GPUs (a job's):
// under the VC's cell already bound above a GPU, or else under a newly bound
// cell of the VC above the GPU: of the cells above it that the VC has an
// unbound cell of the type for, the one holding most of the job's GPUs, then
// the smallest, whose binding keeps the VCs' cells placeable. On failure it
// undoes its bindings.
func (c *Cluster) bindAt(v *vc, phys []*cell) ([]*cell, bool) {
	var binds []*cell
	undo := func() {
		for i := len(binds) - 1; i >= 0; i-- {
			x := binds[i]
			if x.parent == v.root {
				c.unbindTop(x)
			} else {
				x.bound.bound, x.bound = nil, nil
			}
		}
	}
	virt := make([]*cell, len(phys))
	for i, p := range phys {
		var path []*cell // unbound physical cells from p up
		x := p
		for ; x != nil && x.bound == nil; x = x.parent {
			path = append(path, x)
		}
		var vx *cell
		if x != nil {
			if x.bound.vc != v {
				undo()
				return nil, false
			}
			vx = x.bound
		} else {
			// Candidates: the cells above p the VC has an unbound cell of
			// the type for; those holding more of the job's GPUs first, then
			// the smaller.
			type cand struct{ t, cover int }
			var cands []cand
			for t, q := range path {
				if v.unboundTop(q.typ) == nil {
					continue
				}
				cover := 0
				for _, g := range phys {
					if g == q || isAncestor(q, g) {
						cover++
					}
				}
				cands = append(cands, cand{t, cover})
			}
			sort.SliceStable(cands, func(a, b int) bool { return cands[a].cover > cands[b].cover })
			for _, cd := range cands {
				q := path[cd.t]
				top := v.unboundTop(q.typ)
				if !c.takeCell(q) {
					continue
				}
				c.attachTop(top, q)
				if c.feasible() {
					binds = append(binds, top)
					vx, path = top, path[:cd.t]
					break
				}
				c.unbindTop(top)
			}
			if vx == nil {
				undo()
				return nil, false
			}
		}
		for t := len(path) - 1; t >= 0; t-- {
			q := path[t]
			var ch *cell
			for _, y := range vx.children {
				if y.bound == nil && y.typ == q.typ {
					ch = y
					break
				}
			}
			if ch == nil {
				undo()
				return nil, false
			}
			ch.bound, q.bound = q, ch
			binds = append(binds, ch)
			vx = ch
		}
		if !vx.isLeaf() || vx.job != nil || vx.doomed > 0 {
			undo()
			return nil, false
		}
		virt[i] = vx
	}
	return virt, true
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
