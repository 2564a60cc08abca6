package core

import (
	"fmt"
	"sort"
)

// Equal parts: how the live planner shapes a gang larger than a node.
//
// Nomad runs such a gang as one task group with count = nodes, and every
// allocation of a group asks for the same resources, so the gang must be
// split into equal parts, one per node. A gang that a node can hold goes on
// one node (it waits rather than spread); a larger one takes the fewest
// nodes n >= 2 such that n divides its GPUs and n schedulable nodes have
// k/n healthy GPUs each. That shape depends only on the cluster, not on
// what is free: a 16-GPU gang on 8-GPU nodes is always 2 x 8, a 12-GPU one
// 2 x 6, a 24-GPU one 3 x 8; a 17-GPU one never runs there.

// EqualParts makes every placement of this free set one the live planner
// can pin: one node, or equal parts on whole nodes (see Shape).
func (f *FreeGPUs) EqualParts() { f.equalParts = true }

// Shape is how a gang of k GPUs is split under equal parts: on nodes
// nodes, per GPUs on each. ok is false when no split fits the cluster.
func (x *ClusterIndex) Shape(k int) (nodes, per int, ok bool) {
	if k <= 0 {
		return 0, 0, false
	}
	if k <= x.largest {
		return 1, k, true
	}
	for n := 2; n <= k && n <= len(x.nodes); n++ {
		if k%n != 0 || k/n > x.largest {
			continue
		}
		per := k / n
		have := 0
		for _, in := range x.nodes {
			if len(in.gpus) >= per {
				have++
			}
		}
		if have >= n {
			return n, per, true
		}
	}
	return 0, 0, false
}

// Holds reports whether a gang of k GPUs could ever be placed on this
// cluster: it has k healthy GPUs (on one node, or in equal parts, when the
// placements must be so).
func (f *FreeGPUs) Holds(k int) bool {
	if f.singleNode {
		return k <= f.x.largest
	}
	if f.equalParts {
		_, _, ok := f.x.Shape(k)
		return ok
	}
	return k <= f.x.capacity
}

// neverHolds explains why a gang of k GPUs can never be placed.
func (f *FreeGPUs) neverHolds(k int) string {
	switch {
	case f.singleNode:
		return fmt.Sprintf("needs %d GPUs on one node; the largest schedulable node has %d healthy GPUs", k, f.x.largest)
	case f.equalParts && k <= f.x.capacity:
		return fmt.Sprintf("needs %d GPUs, more than a node has (%d): a multi-node gang runs in equal parts, one per node, and no split of %d GPUs into equal parts fits the schedulable nodes", k, f.x.largest, k)
	}
	return fmt.Sprintf("needs %d GPUs; the cluster has %d healthy schedulable GPUs", k, f.x.capacity)
}

// placeParts places a gang as n equal parts of per GPUs on n nodes: inside
// one rack when a rack can hold it (the rack leaving the fewest GPUs free
// on the chosen nodes), else across racks; best fit (the nodes with the
// fewest free GPUs that have per), and inside each node the deepest
// topology cell, as for a single-node gang. The grant's GPUs go node after
// node in name order: that order is the gang's ranks.
func (f *FreeGPUs) placeParts(j *Job, n, per int) (Grant, bool) {
	byRack := map[string][]int{}
	var racks []string
	var all []int
	for i, c := range f.count {
		if c < per || !f.fitsOn(i, j) {
			continue
		}
		r := f.x.nodes[i].node.Rack
		if _, ok := byRack[r]; !ok {
			racks = append(racks, r)
		}
		byRack[r] = append(byRack[r], i)
		all = append(all, i)
	}
	if len(all) < n {
		return Grant{}, false
	}
	sort.Strings(racks)
	var best []int
	bestLeft := 0
	for _, r := range racks {
		if nodes, left := f.fewestFree(byRack[r], n, per); nodes != nil && (best == nil || left < bestLeft) {
			best, bestLeft = nodes, left
		}
	}
	if best == nil {
		best, _ = f.fewestFree(all, n, per)
	}
	sort.Ints(best)
	g := Grant{Job: j.Key}
	for _, i := range best {
		cell, depth := f.cellOn(i, per)
		chosen := pick(cell, per, depth)
		sort.Slice(chosen, func(a, b int) bool { return chosen[a].Index < chosen[b].Index })
		gpuIDs := ids(chosen)
		f.take(gpuIDs)
		g.GPUs = append(g.GPUs, gpuIDs...)
	}
	f.remember(&g)
	f.charge(g, j, 1)
	return g, true
}

// fewestFree picks the n candidate nodes with the fewest free GPUs (each
// has at least per), and counts the GPUs they leave free; nil when there
// are fewer than n.
func (f *FreeGPUs) fewestFree(cands []int, n, per int) ([]int, int) {
	if len(cands) < n {
		return nil, 0
	}
	c := append([]int(nil), cands...)
	sort.SliceStable(c, func(a, b int) bool { return f.count[c[a]] < f.count[c[b]] })
	left := 0
	for _, i := range c[:n] {
		left += f.count[i] - per
	}
	return c[:n], left
}

// Pinnable reports whether a grant has the live shape of its gang: one node
// for a gang a node can hold, else Shape's equal parts (for an Allocator's
// or a Placer's grant, which the core did not shape itself).
func (f *FreeGPUs) Pinnable(g Grant) bool {
	per := map[int]int{}
	for _, id := range g.GPUs {
		p, ok := f.x.gpus[id]
		if !ok {
			return false
		}
		per[p.node]++
	}
	n, each, ok := f.x.Shape(len(g.GPUs))
	if !ok || len(per) != n {
		return false
	}
	for _, k := range per {
		if k != each {
			return false
		}
	}
	return true
}
