package core

import (
	"sort"
	"strings"
)

// nodeCells is one indexed node's topology cells as deepestCell keys them
// (a GPU is in the cell of each prefix of its Path, the empty one
// included, keyed by the prefix joined with "/"), worked out once per
// ClusterIndex so that placing a gang on one node (cellOn) neither joins
// strings nor builds maps.
type nodeCells struct {
	cells int     // distinct keys
	order []int32 // the cells in key order
	// memb[s] is the cells of the GPU in slot s with the prefix length
	// that put it there, in prefix order (a key met twice, twice).
	memb [][]cellRef
}

type cellRef struct{ cell, depth int32 }

func newNodeCells(gpus []GPU) nodeCells {
	var nc nodeCells
	ids := map[string]int32{}
	var keys []string
	for _, g := range gpus {
		var refs []cellRef
		for d := 0; d <= len(g.Path); d++ {
			key := strings.Join(g.Path[:d], "/")
			id, ok := ids[key]
			if !ok {
				id = int32(len(keys))
				ids[key] = id
				keys = append(keys, key)
			}
			refs = append(refs, cellRef{cell: id, depth: int32(d)})
		}
		nc.memb = append(nc.memb, refs)
	}
	nc.cells = len(keys)
	for id := range keys {
		nc.order = append(nc.order, int32(id))
	}
	sort.Slice(nc.order, func(a, b int) bool { return keys[nc.order[a]] < keys[nc.order[b]] })
	return nc
}

// cellOn is deepestCell(f.freeOn(i), k) from the node's precomputed
// cells: the free GPUs of the deepest cell of node i with at least k of
// them (the fewest among equally deep cells, the first by key on a tie),
// and the length of the cell's prefix, as the first free GPU (in slot
// order) that is in the cell names it.
func (f *FreeGPUs) cellOn(i, k int) (gpus []GPU, depth int) {
	nc := &f.x.cells[i]
	both := f.scratch(2 * nc.cells)
	count, depthOf := both[:nc.cells], both[nc.cells:]
	off := f.x.offset[i]
	for s := range nc.memb {
		if !f.avail[off+s] {
			continue
		}
		for _, r := range nc.memb[s] {
			if count[r.cell] == 0 {
				depthOf[r.cell] = int(r.depth)
			}
			count[r.cell]++
		}
	}
	best := -1
	for _, c := range nc.order {
		n := count[c]
		if n == 0 || n < k {
			continue
		}
		if best < 0 || depthOf[c] > depthOf[best] || (depthOf[c] == depthOf[best] && n < count[best]) {
			best = int(c)
		}
	}
	if best < 0 {
		return nil, 0
	}
	gpus = make([]GPU, 0, count[best])
	node := f.x.nodes[i].gpus
	for s := range nc.memb {
		if !f.avail[off+s] {
			continue
		}
		for _, r := range nc.memb[s] {
			if int(r.cell) == best {
				gpus = append(gpus, node[s])
			}
		}
	}
	return gpus, depthOf[best]
}
