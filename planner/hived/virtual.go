package hived

// Virtual cells bind to physical cells lazily, top-down:
//
//   - a VC's top cell (one of its configured cells) binds by buddy
//     allocation (bindTop) when a job first needs a GPU inside it, and
//     unbinds when its last job leaves (a pinned top stays bound);
//   - a cell below binds, when a job needs it, to an unbound physical child
//     of its parent's physical cell with the same type (there is always one:
//     the two have the same children), preferring fewer bad GPUs, then (with
//     a victim cost, victims.go) the least cost of its opportunistic jobs,
//     then fewer opportunistic GPUs; it unbinds when no job uses it and none of its GPUs
//     is doomed.
//
// A virtual GPU that would bind to a bad physical GPU (because its parent's
// physical cell has no healthy unbound one left) is doomed: it stays bound
// to the bad GPU and is not offered to jobs, until the GPU is healthy again
// or its top cell is idle (then everything below the top unbinds and the
// next binding chooses afresh). In a pinned cell, which never unbinds, doomed
// GPUs stay doomed until healthy; an idle pinned GPU is doomed as soon as it
// goes bad.

// vstate is the part of a virtual leaf its ancestors count.
type vstate struct{ avail, used, doomed int }

func vleafState(l *cell) vstate {
	var s vstate
	if l.job != nil {
		s.used = 1
	} else if l.doomed == 0 {
		s.avail = 1
	}
	s.doomed = l.doomed
	return s
}

// vchange propagates a virtual leaf's change from state o.
func vchange(l *cell, o vstate) {
	n := vleafState(l)
	da, du, dd := n.avail-o.avail, n.used-o.used, n.doomed-o.doomed
	for x := l; x != nil; x = x.parent {
		x.avail[0] += da
		x.avail[1] += da
		x.used += du
		if x != l {
			x.doomed += dd
		}
	}
}

// pstate is the part of a physical leaf its ancestors count.
type pstate struct{ a0, a1, opp, used, bad int }

func pleafState(l *cell) pstate {
	var s pstate
	switch {
	case !l.healthy:
		s.bad = 1
	case l.job == nil:
		s.a1 = 1
		if !l.reserved {
			s.a0 = 1
		}
	}
	if l.job != nil {
		s.used = 1
		if !l.job.guaranteed() {
			s.opp = 1
		}
	}
	return s
}

// pchange propagates a physical leaf's change from state o.
func pchange(l *cell, o pstate) {
	n := pleafState(l)
	d0, d1, dopp, du, db := n.a0-o.a0, n.a1-o.a1, n.opp-o.opp, n.used-o.used, n.bad-o.bad
	for x := l; x != nil; x = x.parent {
		x.avail[0] += d0
		x.avail[1] += d1
		x.opp += dopp
		x.used += du
		x.bad += db
	}
}

// ensureBound binds v and its unbound ancestors.
func (c *Cluster) ensureBound(v *cell) error {
	if v.bound != nil {
		return nil
	}
	if v.parent == v.vc.root {
		return c.bindTop(v)
	}
	if err := c.ensureBound(v.parent); err != nil {
		return err
	}
	var best *cell
	for _, p := range v.parent.bound.children {
		if p.bound != nil || p.typ != v.typ {
			continue
		}
		if best == nil || p.bad < best.bad || p.bad == best.bad && c.fewerVictims(p, best) {
			best = p
		}
	}
	if best == nil {
		return errInternal("virtual cell %s has no unbound physical cell left under %s", c.vname(v), v.parent.bound.name)
	}
	v.bound, best.bound = best, v
	return nil
}

// fewerVictims reports whether binding p evicts less than binding q: the
// least victim cost (victims.go), then the fewest opportunistic GPUs.
func (c *Cluster) fewerVictims(p, q *cell) bool {
	if lp, lq := c.oppCost(p), c.oppCost(q); lp != lq {
		return lp < lq
	}
	return p.opp < q.opp
}

// doom marks a virtual GPU bound to a bad physical GPU as lost.
func doom(l *cell) {
	o := vleafState(l)
	l.doomed = 1
	vchange(l, o)
}

func undoom(l *cell) {
	o := vleafState(l)
	l.doomed = 0
	vchange(l, o)
}

// settle unbinds what a virtual GPU's release left unused: the cells above
// it that no job uses and that hold no doomed GPU, and the whole top cell if
// no job uses it any more.
func (c *Cluster) settle(l *cell) {
	x := l
	for ; x.parent != x.vc.root; x = x.parent {
		if x.bound != nil && x.used == 0 && x.doomed == 0 {
			x.bound.bound, x.bound = nil, nil
		}
	}
	if x.used == 0 && x.bound != nil {
		c.dropTop(x)
	}
}

// dropTop unbinds everything below an idle top cell (undooming its GPUs),
// and the top itself. A pinned top stays bound, and so do its doomed GPUs
// (its cells without jobs or doomed GPUs are already unbound by settle).
func (c *Cluster) dropTop(top *cell) {
	if top.pinned {
		return
	}
	var walk func(x *cell)
	walk = func(x *cell) {
		for _, ch := range x.children {
			if ch.bound != nil {
				walk(ch)
			}
		}
		if x.doomed > 0 && x.isLeaf() {
			undoom(x)
		}
		if x != top {
			x.bound.bound, x.bound = nil, nil
		}
	}
	walk(top)
	c.unbindTop(top)
}
