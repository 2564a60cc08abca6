package core

import (
	"math"
	"sort"
)

// ClusterIndex is the part of a cluster's description that does not change
// between rounds: the schedulable nodes in name order, each node's healthy
// GPUs in index order, and where every GPU is. Decide builds one per round
// unless the State carries one; the simulator, whose cluster never changes,
// builds it once.
type ClusterIndex struct {
	nodes []indexedNode
	gpus  map[string]gpuPos
	// offset[i] is where node i's slots start in a flat per-GPU array.
	offset []int
	// capacity is the number of healthy GPUs on schedulable nodes; largest
	// the most on one such node.
	capacity, largest int
	// spans[n] is the GPUs of the n+1 largest nodes together: the most a
	// gang spread over n+1 nodes can hold.
	spans []int
	// byID finds an indexed node by ID; accounted says whether any node
	// accounts CPU or memory.
	byID      map[string]int
	accounted bool
	// maxCPU and maxMemory are the largest capacities of a node (+Inf
	// where some node does not account the resource).
	maxCPU, maxMemory float64
	// racks groups the nodes by rack; order is every node's index in
	// order (span.go).
	racks rackIndex
	order []int
	// cells is each indexed node's topology cells (cells.go).
	cells []nodeCells
}

type indexedNode struct {
	node *Node
	gpus []GPU // healthy GPUs, by index
}

type gpuPos struct{ node, slot int }

// NewClusterIndex indexes the healthy GPUs of the schedulable nodes.
func NewClusterIndex(nodes []Node) *ClusterIndex {
	x := &ClusterIndex{gpus: map[string]gpuPos{}, byID: map[string]int{}}
	order := make([]int, 0, len(nodes))
	for i := range nodes {
		if nodes[i].Schedulable {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return nodes[order[a]].Name < nodes[order[b]].Name })
	for _, i := range order {
		n := &nodes[i]
		in := indexedNode{node: n}
		for _, g := range n.GPUs {
			if g.Healthy {
				in.gpus = append(in.gpus, g)
			}
		}
		sort.SliceStable(in.gpus, func(a, b int) bool { return in.gpus[a].Index < in.gpus[b].Index })
		for slot, g := range in.gpus {
			x.gpus[g.ID] = gpuPos{node: len(x.nodes), slot: slot}
		}
		x.byID[n.ID] = len(x.nodes)
		x.accounted = x.accounted || n.CPU > 0 || n.Memory > 0
		x.maxCPU = max(x.maxCPU, capacityOf(n.CPU))
		x.maxMemory = max(x.maxMemory, capacityOf(n.Memory))
		x.offset = append(x.offset, x.capacity)
		x.capacity += len(in.gpus)
		x.largest = max(x.largest, len(in.gpus))
		x.nodes = append(x.nodes, in)
		x.cells = append(x.cells, newNodeCells(in.gpus))
	}
	x.racks = newRackIndex(x.nodes)
	for i := range x.nodes {
		x.order = append(x.order, i)
	}
	sizes := make([]int, len(x.nodes))
	for i, n := range x.nodes {
		sizes[i] = len(n.gpus)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(sizes)))
	sum := 0
	for _, n := range sizes {
		sum += n
		x.spans = append(x.spans, sum)
	}
	return x
}

// MinNodes is the fewest nodes that can hold a gang of k GPUs on the empty
// cluster (0 when the cluster is too small): consolidated placement never
// spreads a gang over more.
func (x *ClusterIndex) MinNodes(k int) int {
	i := sort.SearchInts(x.spans, k)
	if i == len(x.spans) {
		return 0
	}
	return i + 1
}

// Capacity is the number of healthy GPUs on schedulable nodes.
func (x *ClusterIndex) Capacity() int { return x.capacity }

// FreeGPUs is the set of GPUs that may be granted this round, per node. The
// policy's grants take from it, so a GPU is never granted twice in a round.
type FreeGPUs struct {
	x          *ClusterIndex
	avail      []bool // per GPU slot, node after node (x.offset)
	count      []int  // free GPUs per indexed node
	free       int
	singleNode bool
	equalParts bool
	// cpu and mem are each indexed node's free CPU and memory (+Inf where
	// not accounted); nil when no node accounts them.
	cpu, mem []float64
	// buf is scratch space for placements (scratch).
	buf []int
}

// NewFreeGPUs returns the healthy GPUs of schedulable nodes that no grant in
// grants holds.
func NewFreeGPUs(nodes []Node, grants []Grant) *FreeGPUs {
	return newFreeGPUs(NewClusterIndex(nodes), grants, nil)
}

// newFreeGPUs is the GPUs that no grant in grants holds; with held, only
// the grants whose held is true count.
func newFreeGPUs(x *ClusterIndex, grants []Grant, held []bool) *FreeGPUs {
	f := &FreeGPUs{x: x, avail: make([]bool, x.capacity), count: make([]int, len(x.nodes)), free: x.capacity}
	for i := range f.avail {
		f.avail[i] = true
	}
	for i, n := range x.nodes {
		f.count[i] = len(n.gpus)
	}
	for gi := range grants {
		if held == nil || held[gi] {
			f.takeGrant(&grants[gi])
		}
	}
	if x.accounted {
		f.cpu, f.mem = make([]float64, len(x.nodes)), make([]float64, len(x.nodes))
		for i, n := range x.nodes {
			f.cpu[i], f.mem[i] = capacityOf(n.node.CPU), capacityOf(n.node.Memory)
		}
	}
	return f
}

func capacityOf(c float64) float64 {
	if c > 0 {
		return c
	}
	return math.Inf(1)
}

// demands reports whether j's CPU or memory is accounted on this cluster.
func (f *FreeGPUs) demands(j *Job) bool { return f.cpu != nil && (j.CPU > 0 || j.Memory > 0) }

// charge takes (sign 1) or returns (sign -1) the CPU and memory of a job
// granted g, on each of its nodes (every part of an equal-parts gang runs
// the same task). Only single-node and equal-parts grants carry them.
func (f *FreeGPUs) charge(g Grant, j *Job, sign float64) {
	if !f.demands(j) {
		return
	}
	if g.at != nil && g.at.x == f.x && len(g.at.nodes) > 0 && (g.Node != "" || f.equalParts) {
		for n, i := range g.at.nodes {
			if n > 0 && g.at.nodes[n-1] == i {
				continue
			}
			f.cpu[i] -= sign * j.CPU
			f.mem[i] -= sign * j.Memory
		}
		return
	}
	if i, ok := f.x.byID[g.Node]; ok {
		f.cpu[i] -= sign * j.CPU
		f.mem[i] -= sign * j.Memory
	}
}

// everFits reports whether j's CPU and memory fit some node's capacity.
func (f *FreeGPUs) everFits(j *Job) bool {
	return !f.demands(j) || (j.CPU <= f.x.maxCPU && j.Memory <= f.x.maxMemory)
}

// fitsOn reports whether node i has j's CPU and memory free.
func (f *FreeGPUs) fitsOn(i int, j *Job) bool {
	return !f.demands(j) || (j.CPU <= f.cpu[i]+1e-9 && j.Memory <= f.mem[i]+1e-9)
}

// clone is a copy of the free set that placements can take from without
// changing f.
func (f *FreeGPUs) clone() *FreeGPUs {
	c := *f
	c.avail, c.count = append([]bool(nil), f.avail...), append([]int(nil), f.count...)
	c.buf = nil
	if f.cpu != nil {
		c.cpu, c.mem = append([]float64(nil), f.cpu...), append([]float64(nil), f.mem...)
	}
	return &c
}

// SingleNode restricts placements to one node each (the live planner pins a
// job to one node).
func (f *FreeGPUs) SingleNode() { f.singleNode = true }

// Capacity is the most GPUs one job can ever get: the healthy GPUs of all
// schedulable nodes, or of the largest one when placements are single-node.
func (f *FreeGPUs) Capacity() int {
	if f.singleNode {
		return f.x.largest
	}
	return f.x.capacity
}

// Largest is the most healthy GPUs on one schedulable node.
func (f *FreeGPUs) Largest() int { return f.x.largest }

// Total is the number of free GPUs on all nodes.
func (f *FreeGPUs) Total() int { return f.free }

// freeOn lists node i's free GPUs in index order.
func (f *FreeGPUs) freeOn(i int) []GPU {
	out := make([]GPU, 0, f.count[i])
	off := f.x.offset[i]
	for s, g := range f.x.nodes[i].gpus {
		if f.avail[off+s] {
			out = append(out, g)
		}
	}
	return out
}

// take removes GPUs from the free set.
func (f *FreeGPUs) take(ids []string) {
	for _, id := range ids {
		if p, ok := f.x.gpus[id]; ok && f.avail[f.x.offset[p.node]+p.slot] {
			f.avail[f.x.offset[p.node]+p.slot] = false
			f.count[p.node]--
			f.free--
		}
	}
}

// takeGrant is take for a grant, by its remembered positions when it was
// placed with this index.
func (f *FreeGPUs) takeGrant(g *Grant) {
	if g.at == nil || g.at.x != f.x {
		f.take(g.GPUs)
		return
	}
	avail, count, nodes := f.avail, f.count, g.at.nodes
	taken := 0
	for i, at := range g.at.pos {
		if avail[at] {
			avail[at] = false
			count[nodes[i]]--
			taken++
		}
	}
	f.free -= taken
}

// remember records where g's GPUs are in this index.
func (f *FreeGPUs) remember(g *Grant) {
	buf := make([]int32, 0, 2*len(g.GPUs)) // one allocation, read together
	at := &gpuAt{x: f.x, pos: buf[:0:len(g.GPUs)], nodes: buf[len(g.GPUs):len(g.GPUs)]}
	for _, id := range g.GPUs {
		p, ok := f.x.gpus[id]
		if !ok {
			return
		}
		at.pos = append(at.pos, int32(f.x.offset[p.node]+p.slot))
		at.nodes = append(at.nodes, int32(p.node))
	}
	g.at = at
}

// Take removes a grant's GPUs from the free set, for a Placer that chose
// them; it reports false, taking nothing, when one of them is not free.
func (f *FreeGPUs) Take(g Grant) bool {
	for _, id := range g.GPUs {
		p, ok := f.x.gpus[id]
		if !ok || !f.avail[f.x.offset[p.node]+p.slot] {
			return false
		}
	}
	f.take(g.GPUs)
	return true
}

// Free is the GPUs of the index's nodes that no grant in grants holds.
func (x *ClusterIndex) Free(grants []Grant) *FreeGPUs { return newFreeGPUs(x, grants, nil) }

// TakeGrant takes a grant's GPUs from the free set (the GPUs of a grant this
// set's index placed; others by ID), those of them that are free.
func (f *FreeGPUs) TakeGrant(g Grant) { f.takeGrant(&g) }

// Give returns a grant's GPUs to the free set (a finished or preempted
// job's), those of them on the index's nodes.
func (f *FreeGPUs) Give(g Grant) { f.give(g) }

// freeOf is the round's free set: the GPUs of x that no claimed grant of
// s holds, from a copy of s.Free when the caller keeps one that fits.
func freeOf(s State, x *ClusterIndex, claimed []bool) *FreeGPUs {
	if f := s.Free; f != nil && f.x == x && !f.singleNode && !f.equalParts {
		held := 0
		for gi := range s.Grants {
			if !claimed[gi] {
				held = -1
				break
			}
			held += len(s.Grants[gi].GPUs)
		}
		if held >= 0 && f.free == x.capacity-held {
			return f.clone()
		}
	}
	return newFreeGPUs(x, s.Grants, claimed)
}

// give returns a grant's GPUs to the free set (a preempted job's). GPUs that
// became unhealthy or sit on unschedulable nodes stay out.
func (f *FreeGPUs) give(g Grant) {
	if g.at != nil && g.at.x == f.x {
		for i, at := range g.at.pos {
			if !f.avail[at] {
				f.avail[at] = true
				f.count[g.at.nodes[i]]++
				f.free++
			}
		}
		return
	}
	for _, id := range g.GPUs {
		if p, ok := f.x.gpus[id]; ok && !f.avail[f.x.offset[p.node]+p.slot] {
			f.avail[f.x.offset[p.node]+p.slot] = true
			f.count[p.node]++
			f.free++
		}
	}
}
