package core

import "sort"

// FreeGPUs is the set of GPUs that may be granted this round, per node. The
// policy consults it and the placement takes from it, so a GPU is never
// granted twice in one round.
type FreeGPUs struct {
	nodes []freeNode
	// largest is the most healthy GPUs on any schedulable node: a job that
	// needs more can never be placed on one node.
	largest int
}

type freeNode struct {
	node *Node
	free []GPU // sorted by index
}

// NewFreeGPUs returns the healthy GPUs of schedulable nodes that no grant in
// grants holds.
func NewFreeGPUs(nodes []Node, grants []Grant) *FreeGPUs {
	used := make(map[string]bool)
	for _, g := range grants {
		for _, id := range g.GPUs {
			used[id] = true
		}
	}
	f := &FreeGPUs{}
	for i := range nodes {
		n := &nodes[i]
		if !n.Schedulable {
			continue
		}
		fn := freeNode{node: n}
		healthy := 0
		for _, g := range n.GPUs {
			if !g.Healthy {
				continue
			}
			healthy++
			if !used[g.ID] {
				fn.free = append(fn.free, g)
			}
		}
		sort.Slice(fn.free, func(a, b int) bool { return fn.free[a].Index < fn.free[b].Index })
		f.largest = max(f.largest, healthy)
		f.nodes = append(f.nodes, fn)
	}
	sort.Slice(f.nodes, func(a, b int) bool { return f.nodes[a].node.Name < f.nodes[b].node.Name })
	return f
}

// Largest is the most healthy GPUs on one schedulable node.
func (f *FreeGPUs) Largest() int { return f.largest }

// Total is the number of free GPUs on all nodes.
func (f *FreeGPUs) Total() int {
	n := 0
	for _, fn := range f.nodes {
		n += len(fn.free)
	}
	return n
}

// take removes the given GPUs of node i from the free set.
func (f *FreeGPUs) take(i int, ids []string) {
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	kept := f.nodes[i].free[:0]
	for _, g := range f.nodes[i].free {
		if !gone[g.ID] {
			kept = append(kept, g)
		}
	}
	f.nodes[i].free = kept
}
