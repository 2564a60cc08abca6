package hived

import (
	"cmp"
	"slices"
	"sort"
)

// Placement of a gang in one tree: a VC's virtual cells (guaranteed jobs) or
// the physical cells (opportunistic jobs). It reads only the tree's shape and
// avail counters, so a VC's jobs are placed in its virtual cells exactly as
// they would be in a private cluster made of those cells.
//
// A gang of k GPUs goes to its host: the smallest cell with k available
// GPUs (a pair for 2, a socket for 4, a node for 8, a rack for 16, ...);
// among those of one size the one with the fewest available GPUs (best fit),
// found by visiting the fullest children first (which keeps emptier cells
// whole). Inside the host, fill takes whole available children, largest
// first, while they fit; the rest goes to the best host among the other
// children, or, when none holds it, to the children with the most available
// GPUs in turn.

// search is the state of one findHost.
type search struct {
	k, w, minCap int
	nodeOnly     bool
	best         *cell
	done         bool
}

// findHost returns the host for k GPUs counted by avail[w] under root, nil
// if none; with nodeOnly the host must lie within one node. caps are the
// tree's cell sizes.
func (c *Cluster) findHost(root *cell, k, w int, nodeOnly bool, caps []int) *cell {
	if k <= 0 || root.avail[w] < k {
		return nil
	}
	i := sort.SearchInts(caps, k)
	s := search{k: k, w: w, nodeOnly: nodeOnly, minCap: root.gpus}
	if i < len(caps) {
		s.minCap = caps[i]
	}
	c.visit(&s, root)
	return s.best
}

func (c *Cluster) visit(s *search, x *cell) {
	if !s.nodeOnly || x.inNode {
		if b := s.best; b == nil || x.gpus < b.gpus || x.gpus == b.gpus && x.avail[s.w] < b.avail[s.w] {
			s.best = x
			if x.gpus == s.minCap && x.avail[s.w] == s.k {
				s.done = true
				return
			}
		}
	}
	base := len(c.hostBuf)
	for _, ch := range x.children {
		if ch.avail[s.w] >= s.k {
			c.hostBuf = append(c.hostBuf, ch)
		}
	}
	seg := c.hostBuf[base:]
	if s.w == 0 {
		slices.SortFunc(seg, byAvail0)
	} else {
		slices.SortFunc(seg, byAvail1)
	}
	for i := base; i < len(c.hostBuf) && !s.done; i++ {
		c.visit(s, c.hostBuf[i])
	}
	c.hostBuf = c.hostBuf[:base]
}

func byAvail0(a, b *cell) int {
	if d := cmp.Compare(a.avail[0], b.avail[0]); d != 0 {
		return d
	}
	return cmp.Compare(a.order, b.order)
}

func byAvail1(a, b *cell) int {
	if d := cmp.Compare(a.avail[1], b.avail[1]); d != 0 {
		return d
	}
	return cmp.Compare(a.order, b.order)
}

// fill appends k available leaves of host h (counted by avail[w]) to out.
func (c *Cluster) fill(h *cell, k, w int, caps []int, out []*cell) []*cell {
	if h.avail[w] == k {
		return collectAvail(h, w, out)
	}
	c.stamp++
	s := c.stamp
	r := k
	// Whole available children, largest first, while they fit.
	base := len(c.fillBuf)
	for _, ch := range h.children {
		if ch.avail[w] == ch.gpus && ch.gpus <= r {
			c.fillBuf = append(c.fillBuf, ch)
		}
	}
	slices.SortStableFunc(c.fillBuf[base:], func(a, b *cell) int { return cmp.Compare(b.gpus, a.gpus) })
	for i := base; i < len(c.fillBuf); i++ {
		if ch := c.fillBuf[i]; ch.gpus <= r {
			out = collectAvail(ch, w, out)
			r -= ch.gpus
			ch.stamp = s
		}
	}
	c.fillBuf = c.fillBuf[:base]
	for r > 0 {
		var best *cell
		for _, ch := range h.children {
			if ch.stamp == s || ch.avail[w] < r {
				continue
			}
			if x := c.findHost(ch, r, w, false, caps); x != nil {
				if best == nil || x.gpus < best.gpus || x.gpus == best.gpus && x.avail[w] < best.avail[w] {
					best = x
				}
			}
		}
		if best != nil {
			return c.fill(best, r, w, caps, out)
		}
		var most *cell
		for _, ch := range h.children {
			if ch.stamp != s && ch.avail[w] > 0 && (most == nil || ch.avail[w] > most.avail[w]) {
				most = ch
			}
		}
		out = collectAvail(most, w, out)
		r -= most.avail[w]
		most.stamp = s
	}
	return out
}

// collectAvail appends x's available leaves to out.
func collectAvail(x *cell, w int, out []*cell) []*cell {
	if x.isLeaf() {
		if x.avail[w] > 0 {
			out = append(out, x)
		}
		return out
	}
	for _, ch := range x.children {
		if ch.avail[w] > 0 {
			out = collectAvail(ch, w, out)
		}
	}
	return out
}
