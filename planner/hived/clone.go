package hived

import "github.com/themis-nomad/themis/planner/core"

// Clone is a deep copy of c: every physical and virtual cell with its
// counters, buddy state and binding, the free-cell pools, the VCs and the
// jobs, so that what is done to one is not seen by the other. It shares
// only what no method changes after New: the cell types, the config, the
// nodes as given, and the indexes of the cells by name and GPU ID. The
// live planner builds the cells of its nodes and VC config once and
// replays each round's leases on a clone (planner/vcs.go): New spends
// most of its time naming and indexing the cells of every GPU, which a
// clone copies in two slabs.
func (c *Cluster) Clone() *Cluster {
	n := &Cluster{gpuType: c.gpuType, nodes: c.nodes, cfg: c.cfg, types: c.types, typeByName: c.typeByName, caps: c.caps,
		gpuAt: c.gpuAt, nameAt: c.nameAt, poolBad: c.poolBad, seq: c.seq, stamp: c.stamp, victimCost: c.victimCost}

	// The cells, all in one slab, each found by its preorder position in
	// its tree (cell.order): the physical tree's is its index in c.cells,
	// a VC's its index in the VC's cells.
	total, kids := len(c.cells), 0
	for _, x := range c.cells {
		kids += len(x.children)
	}
	for _, v := range c.vcs {
		total += len(v.cells)
		for _, x := range v.cells {
			kids += len(x.children)
		}
	}
	slab := make([]cell, total)
	children := make([]*cell, kids)
	phys := slab[:len(c.cells)]
	vslab := make([][]cell, len(c.vcs))
	at := len(c.cells)
	for i, v := range c.vcs {
		vslab[i], at = slab[at:at+len(v.cells)], at+len(v.cells)
	}
	vcs := make([]*vc, len(c.vcs))
	for i, v := range c.vcs {
		vcs[i] = &vc{name: v.name, idx: i, caps: v.caps, jobs: make(map[core.JobKey]*job, len(v.jobs))}
	}
	to := func(x *cell) *cell {
		switch {
		case x == nil:
			return nil
		case x.vc == nil:
			return &phys[x.order]
		}
		return &vslab[x.vc.idx][x.order]
	}
	jobs := make(map[core.JobKey]*job, len(c.jobs))
	toJob := func(j *job) *job {
		if j == nil {
			return nil
		}
		return jobs[j.key]
	}
	for k, j := range c.jobs {
		nj := *j
		if j.v != nil {
			nj.v = vcs[j.v.idx]
		}
		jobs[k] = &nj
	}
	for _, j := range jobs {
		j.phys = mapCells(j.phys, to)
		j.virt = mapCells(j.virt, to)
		if j.v != nil {
			j.v.jobs[j.key] = j
		}
	}
	copyCell := func(y *cell, x *cell) {
		*y = *x
		y.parent, y.bound, y.job = to(x.parent), to(x.bound), toJob(x.job)
		if y.vc != nil {
			y.vc = vcs[x.vc.idx]
		}
		if len(x.children) > 0 {
			k := len(x.children)
			y.children, children = children[:k:k], children[k:]
			for i, ch := range x.children {
				y.children[i] = to(ch)
			}
		}
	}
	n.cells = make([]*cell, len(c.cells))
	for i, x := range c.cells {
		copyCell(&phys[i], x)
		n.cells[i] = &phys[i]
	}
	for i, v := range c.vcs {
		nv := vcs[i]
		nv.cells = make([]*cell, len(v.cells))
		for k, x := range v.cells {
			copyCell(&vslab[i][k], x)
			nv.cells[k] = &vslab[i][k]
		}
		nv.root = to(v.root)
		nv.tops = mapCells(v.tops, to)
		nv.pins = mapCells(v.pins, to)
	}
	n.root = to(c.root)
	n.vcs = vcs
	n.vcByName = make(map[string]*vc, len(vcs))
	for _, v := range vcs {
		n.vcByName[v.name] = v
	}
	n.jobs = jobs
	n.pool = make([][]*cell, len(c.pool))
	for i, p := range c.pool {
		n.pool[i] = mapCells(p, to)
	}
	n.demand = append([]int(nil), c.demand...)
	return n
}

// mapCells is cs with each cell mapped (nil stays nil).
func mapCells(cs []*cell, to func(*cell) *cell) []*cell {
	if cs == nil {
		return nil
	}
	out := make([]*cell, len(cs))
	for i, x := range cs {
		out[i] = to(x)
	}
	return out
}
