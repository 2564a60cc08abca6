package core

import "sort"

// FreeGPUs is the set of GPUs that may be granted this round, per node. The
// policy's grants take from it, so a GPU is never granted twice in a round.
type FreeGPUs struct {
	nodes  []freeNode
	byNode map[string]int
	byGPU  map[string]int // GPU ID -> index into nodes
	// capacity is the number of healthy GPUs on schedulable nodes; largest
	// the most on one such node.
	capacity, largest int
	free              int
	singleNode        bool
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
	f := &FreeGPUs{byNode: map[string]int{}, byGPU: map[string]int{}}
	order := make([]int, 0, len(nodes))
	for i := range nodes {
		if nodes[i].Schedulable {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool { return nodes[order[a]].Name < nodes[order[b]].Name })
	for _, i := range order {
		n := &nodes[i]
		fn := freeNode{node: n}
		healthy := 0
		for _, g := range n.GPUs {
			if !g.Healthy {
				continue
			}
			healthy++
			f.byGPU[g.ID] = len(f.nodes)
			if !used[g.ID] {
				fn.free = append(fn.free, g)
			}
		}
		sort.Slice(fn.free, func(a, b int) bool { return fn.free[a].Index < fn.free[b].Index })
		f.capacity += healthy
		f.largest = max(f.largest, healthy)
		f.free += len(fn.free)
		f.byNode[n.ID] = len(f.nodes)
		f.nodes = append(f.nodes, fn)
	}
	return f
}

// SingleNode restricts placements to one node each (the live planner pins a
// job to one node).
func (f *FreeGPUs) SingleNode() { f.singleNode = true }

// Capacity is the most GPUs one job can ever get: the healthy GPUs of all
// schedulable nodes, or of the largest one when placements are single-node.
func (f *FreeGPUs) Capacity() int {
	if f.singleNode {
		return f.largest
	}
	return f.capacity
}

// Largest is the most healthy GPUs on one schedulable node.
func (f *FreeGPUs) Largest() int { return f.largest }

// Total is the number of free GPUs on all nodes.
func (f *FreeGPUs) Total() int { return f.free }

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
	f.free -= len(f.nodes[i].free) - len(kept)
	f.nodes[i].free = kept
}

// give returns a grant's GPUs to the free set (a preempted job's).
func (f *FreeGPUs) give(g Grant) {
	touched := map[int]bool{}
	for _, id := range g.GPUs {
		i, ok := f.byGPU[id]
		if !ok {
			continue // unhealthy or on an unschedulable node: stays out
		}
		for _, gpu := range f.nodes[i].node.GPUs {
			if gpu.ID == id {
				f.nodes[i].free = append(f.nodes[i].free, gpu)
				f.free++
			}
		}
		touched[i] = true
	}
	for i := range touched {
		free := f.nodes[i].free
		sort.Slice(free, func(a, b int) bool { return free[a].Index < free[b].Index })
	}
}
