package hived

import "fmt"

// The buddy layer: which physical cells are free, and which one a VC's cell
// binds to.
//
// The pool holds the free typed cells that are whole and maximal: a pool
// root (a typed cell under an untyped group, or the top) that nothing
// touches, or a child of a split cell. Allocating a cell of type T takes a
// pool cell of type T, or splits a pool cell of a type above T down to it
// (its other children enter the pool). Freeing a cell puts it back in the
// pool and merges buddies: a typed cell whose children are all in the pool
// replaces them.
//
// Every type has one child type, so the cells of a type come only from
// cells of its parent types, and are interchangeable for counting. carve
// counts, top-down by type, how many cells of each type the pool can give
// once the larger types' demand is served; it is exact: the VCs' unbound
// cells fit in the pool iff no type comes out short. The invariant kept at
// all times is that they do. Taking a pool cell of type T for a VC's cell of
// type T keeps it; splitting a pool cell of type A down to T keeps it iff
// every type from A down to T's parent has a cell to spare (left >= 1), and
// chooseCell only considers such splits. That is the sharing-safety argument:
// a VC can always bind any of its unbound cells.

// poolAdd puts a typed cell in the pool.
func (c *Cluster) poolAdd(p *cell) {
	p.inPool = true
	p.poolPos = len(c.pool[p.typ.idx])
	c.pool[p.typ.idx] = append(c.pool[p.typ.idx], p)
	if p.parent != nil {
		p.parent.poolKids++
	}
	for a := p; a != nil; a = a.parent {
		a.poolFree += p.gpus
	}
	c.poolBad += p.bad
}

// poolRemove takes a cell out of the pool.
func (c *Cluster) poolRemove(p *cell) {
	s := c.pool[p.typ.idx]
	last := s[len(s)-1]
	s[p.poolPos] = last
	last.poolPos = p.poolPos
	c.pool[p.typ.idx] = s[:len(s)-1]
	p.inPool = false
	if p.parent != nil {
		p.parent.poolKids--
	}
	for a := p; a != nil; a = a.parent {
		a.poolFree -= p.gpus
	}
	c.poolBad -= p.bad
}

// inPoolCell reports whether x is a pool cell or lies inside one.
func inPoolCell(x *cell) bool {
	for ; x != nil; x = x.parent {
		if x.inPool {
			return true
		}
	}
	return false
}

// takeCell takes p out of the free cells: from the pool, or by splitting
// the pool cell that holds it down to it. It reports false (changing
// nothing) when p is neither free nor inside a free cell.
func (c *Cluster) takeCell(p *cell) bool {
	if p.typ == nil || p.split || p.alloc {
		return false
	}
	if p.inPool {
		c.poolRemove(p)
		return true
	}
	path := c.pathBuf[:0]
	a := p
	for ; a != nil && !a.inPool; a = a.parent {
		if a.alloc {
			return false
		}
		path = append(path, a)
	}
	if a == nil {
		return false
	}
	c.poolRemove(a)
	for i := len(path) - 1; i >= 0; i-- {
		a.split = true
		next := path[i]
		for _, s := range a.children {
			if s != next {
				c.poolAdd(s)
			}
		}
		a = next
	}
	c.pathBuf = path[:0]
	return true
}

// freeCell returns an allocated cell to the pool and merges buddies.
func (c *Cluster) freeCell(p *cell) {
	c.poolAdd(p)
	for q := p.parent; q != nil && q.typ != nil && q.poolKids == len(q.children); q = q.parent {
		for _, ch := range q.children {
			c.poolRemove(ch)
		}
		q.split = false
		c.poolAdd(q)
	}
}

// carve counts top-down how many cells of each type the free cells give:
// avail[t] = count[t] + sum over parent types P of left[P] * P.count, and
// left[t] = avail[t] - demand[t]. It returns the first short type (top-down)
// or -1. A short type passes nothing down.
func (c *Cluster) carve(count, demand, left []int) int {
	short := -1
	for i := len(c.types) - 1; i >= 0; i-- {
		t := c.types[i]
		n := count[i]
		for _, p := range t.parents {
			if left[p.idx] > 0 {
				n += left[p.idx] * p.count
			}
		}
		left[i] = n - demand[i]
		if left[i] < 0 && short < 0 {
			short = i
		}
	}
	return short
}

// poolCounts fills count with the number of pool cells per type.
func (c *Cluster) poolCounts(count []int) {
	for i := range c.pool {
		count[i] = len(c.pool[i])
	}
}

// healthyCounts adds sign times the maximal healthy typed cells of x (x
// itself if it has no bad GPU) to count.
func healthyCounts(x *cell, sign int, count []int) {
	if x.bad == 0 {
		count[x.typ.idx] += sign
		return
	}
	for _, ch := range x.children {
		if ch.bad < ch.gpus {
			healthyCounts(ch, sign, count)
		}
	}
}

// isAncestor reports whether a lies strictly above x.
func isAncestor(a, x *cell) bool {
	if x == nil {
		return false
	}
	for y := x.parent; y != nil; y = y.parent {
		if y == a {
			return true
		}
	}
	return false
}

// candidate is a physical cell a VC's cell may bind to, with its score:
// fewer bad GPUs first, then keeping the healthy free cells able to host
// every other unbound VC cell (keep 0 is better), then no split (whole free
// cells first) or the shallowest split, then (with a victim cost,
// victims.go) the least cost of the opportunistic jobs in the cell, then
// fewer opportunistic GPUs (fewer preemptions), then the fullest parent
// (keeps other cells whole), then topology order (the search over splits
// stops once nothing can beat the best, but never at a candidate later in
// topology order than one it has not searched: the choice depends on the
// cells' state, not on the order the pool lists them in, which is history).
type candidate struct {
	p                     *cell
	bad, keep, depth, opp int
	packing               int
	lost                  float64
}

func (a *candidate) better(b *candidate) bool {
	if b.p == nil {
		return true
	}
	switch {
	case a.bad != b.bad:
		return a.bad < b.bad
	case a.keep != b.keep:
		return a.keep < b.keep
	case a.depth != b.depth:
		return a.depth < b.depth
	case a.lost != b.lost:
		return a.lost < b.lost
	case a.opp != b.opp:
		return a.opp < b.opp
	case a.packing != b.packing:
		return a.packing < b.packing
	}
	return a.p.order < b.p.order
}

// chooser is the state of one chooseCell.
type chooser struct {
	c       *Cluster
	t       *cellType
	healthy []int // the free healthy cells per type, once computed
	demand  []int // the unbound VC cells per type, less the one to bind
	best    candidate
}

// keeps reports (0: yes, 1: no) whether binding p, taken out of pool cell
// a, leaves the free healthy cells able to host every other unbound VC
// cell. Without bad GPUs in the pool that is always so.
func (ch *chooser) keeps(p, a *cell) int {
	c := ch.c
	if c.poolBad == 0 {
		return 0
	}
	if p.bad > 0 {
		return 1
	}
	nt := len(c.types)
	if ch.healthy == nil {
		ch.healthy, ch.demand = c.scratch(2, nt), c.scratch(3, nt)
		for i := range c.pool {
			for _, q := range c.pool[i] {
				healthyCounts(q, 1, ch.healthy)
			}
		}
		copy(ch.demand, c.demand)
		ch.demand[ch.t.idx]--
	}
	h, l := c.scratch(4, nt), c.scratch(5, nt)
	copy(h, ch.healthy)
	// Taking p out of a changes a's healthy parts only on the way down to
	// p: the highest healthy cell on that way, q, was one healthy part; now
	// the siblings of the cells from q's child down to p are.
	path := c.pathBuf[:0]
	for x := p; x != a; x = x.parent {
		path = append(path, x)
	}
	path = append(path, a)
	i := len(path) - 1
	for path[i].bad > 0 {
		i--
	}
	h[path[i].typ.idx]--
	for ; i > 0; i-- {
		for _, s := range path[i].children {
			if s != path[i-1] {
				h[s.typ.idx]++
			}
		}
	}
	c.pathBuf = path[:0]
	if c.carve(h, ch.demand, l) >= 0 {
		return 1
	}
	return 0
}

// consider scores p (taken out of pool cell a by a split of the given
// depth) and keeps it if it is the best so far; it reports whether p is
// unbeatable (healthy, keeps the healthy cells, no preemption, and, when
// whole, the only free cell of its parent).
func (ch *chooser) consider(p, a *cell, depth int) bool {
	cand := candidate{p: p, bad: p.bad, depth: depth, opp: p.opp, lost: ch.c.oppCost(p)}
	if depth == 0 && p.parent != nil {
		cand.packing = p.parent.poolFree
	}
	// The keep test is the costly part: skip it when p cannot win anyway.
	if b := &ch.best; b.p != nil && b.keep == 0 {
		x := cand
		if !x.better(b) {
			return false
		}
	}
	cand.keep = ch.keeps(p, a)
	if !cand.better(&ch.best) {
		return false
	}
	ch.best = cand
	return cand.bad == 0 && cand.keep == 0 && cand.opp == 0 && (depth > 0 || cand.packing <= p.gpus)
}

// chooseCell picks the physical cell to bind a VC's unbound cell of type t
// to (see candidate for the preferences), among the choices that keep every
// other unbound VC cell placeable; nil if none (which the invariant rules
// out).
func (c *Cluster) chooseCell(t *cellType) *cell {
	nt := len(c.types)
	count, left := c.scratch(0, nt), c.scratch(1, nt)
	c.poolCounts(count)
	c.carve(count, c.demand, left)
	ch := chooser{c: c, t: t}
	for _, p := range c.pool[t.idx] {
		ch.consider(p, p, 0)
	}
	if b := ch.best; b.p != nil && b.bad == 0 && b.keep == 0 {
		return b.p // a split cannot do better
	}
	// Split a pool cell of a type above t, where every type on the way down
	// has a cell to spare; shallowest splits first.
	allowed := c.scratch(6, nt)
	var mark func(u *cellType)
	mark = func(u *cellType) {
		for _, p := range u.parents {
			if left[p.idx] >= 1 && allowed[p.idx] == 0 {
				allowed[p.idx] = 1
				mark(p)
			}
		}
	}
	mark(t)
	for i := range allowed { // height ascending
		if allowed[i] == 0 {
			continue
		}
		depth := c.types[i].height - t.height
		if b := ch.best; b.p != nil && b.bad == 0 && b.keep == 0 && b.depth < depth {
			break
		}
		// The pool's order is history (swap-removes): to choose by
		// topology order whatever it is, once a cell nothing can beat is
		// found, only pool cells before it in topology order are searched.
		found := false
		for _, a := range c.pool[i] {
			if found && a.order > ch.best.p.order {
				continue
			}
			if c.splitCandidates(&ch, a, a, depth) {
				found = true
			}
		}
		if found {
			return ch.best.p
		}
	}
	return ch.best.p
}

// splitCandidates considers the cells of type ch.t inside x (in pool cell
// a); it reports whether it found an unbeatable one.
func (c *Cluster) splitCandidates(ch *chooser, x, a *cell, depth int) bool {
	if x.typ == ch.t {
		return ch.consider(x, a, depth)
	}
	if x.bad == x.gpus && ch.best.p != nil {
		return false // nothing healthy here
	}
	for _, y := range x.children {
		if c.splitCandidates(ch, y, a, depth) {
			return true
		}
	}
	return false
}

// scratch returns the i-th scratch slice of n ints, zeroed.
func (c *Cluster) scratch(i, n int) []int {
	for len(c.ints) <= i {
		c.ints = append(c.ints, nil)
	}
	if cap(c.ints[i]) < n {
		c.ints[i] = make([]int, n)
	}
	s := c.ints[i][:n]
	for j := range s {
		s[j] = 0
	}
	return s
}

// setReserved marks p's subtree as inside (or no longer inside) a cell
// allocated to a VC, which takes its idle GPUs out of (or back into) the
// opportunistic first choice (avail[0]).
func (c *Cluster) setReserved(p *cell, on bool) {
	d := p.avail[1] - p.avail[0]
	if on {
		d = -p.avail[0]
	}
	for a := p.parent; a != nil; a = a.parent {
		a.avail[0] += d
	}
	var walk func(x *cell)
	walk = func(x *cell) {
		x.reserved = on
		if on {
			x.avail[0] = 0
		} else {
			x.avail[0] = x.avail[1]
		}
		for _, ch := range x.children {
			walk(ch)
		}
	}
	walk(p)
}

// attachTop binds a VC's top cell to the allocated physical cell p.
func (c *Cluster) attachTop(top, p *cell) {
	p.alloc = true
	p.pinned = top.pinned
	top.bound, p.bound = p, top
	c.setReserved(p, true)
	if !top.pinned {
		c.demand[top.typ.idx]--
	}
}

// bindTop binds an unbound top cell of a VC by buddy allocation.
func (c *Cluster) bindTop(top *cell) error {
	p := c.chooseCell(top.typ)
	if p == nil || !c.takeCell(p) {
		return fmt.Errorf("internal error: no free %s cell for VC %q although its cells were feasible", top.typ.name, top.vc.name)
	}
	c.attachTop(top, p)
	return nil
}

// unbindTop releases a lazily bound top cell: its physical cell returns to
// the pool.
func (c *Cluster) unbindTop(top *cell) {
	p := top.bound
	top.bound, p.bound = nil, nil
	c.setReserved(p, false)
	p.alloc = false
	c.freeCell(p)
	c.demand[top.typ.idx]++
}
