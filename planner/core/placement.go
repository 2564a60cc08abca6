package core

import (
	"sort"
	"strings"
)

// Place picks a node and GPUs for a gang of k GPUs on one node and takes them
// from the free set. It consolidates: the GPUs come from the deepest cell of
// the topology tree (NVLink pair, PCIe switch, socket, node) that has k free
// GPUs, and among equally deep cells from the one with the fewest free GPUs
// (best fit), which keeps larger cells whole for larger jobs. ok is false when
// no node has k free GPUs.
func (f *FreeGPUs) Place(job JobKey, k int) (g Grant, ok bool) {
	best := -1
	var bestCell cellChoice
	for i, fn := range f.nodes {
		if len(fn.free) < k {
			continue
		}
		c := deepestCell(fn.free, k)
		if best < 0 || c.better(bestCell, len(fn.free), len(f.nodes[best].free)) {
			best, bestCell = i, c
		}
	}
	if best < 0 {
		return Grant{}, false
	}
	chosen := pick(bestCell.gpus, k, len(bestCell.prefix))
	sort.Slice(chosen, func(a, b int) bool { return chosen[a].Index < chosen[b].Index })
	gpuIDs := ids(chosen)
	f.take(best, gpuIDs)
	return Grant{Job: job, Node: f.nodes[best].node.ID, GPUs: gpuIDs}, true
}

// cellChoice is a cell of one node's topology tree and its free GPUs.
type cellChoice struct {
	prefix []string
	gpus   []GPU
}

// better orders candidate cells across nodes: deeper first, then fewer free
// GPUs in the cell, then fewer free GPUs on the node (both best fit).
func (c cellChoice) better(o cellChoice, nodeFree, oNodeFree int) bool {
	if len(c.prefix) != len(o.prefix) {
		return len(c.prefix) > len(o.prefix)
	}
	if len(c.gpus) != len(o.gpus) {
		return len(c.gpus) < len(o.gpus)
	}
	return nodeFree < oNodeFree
}

// deepestCell finds the deepest cell with at least k free GPUs; the node
// itself (empty prefix) always qualifies when len(free) >= k.
func deepestCell(free []GPU, k int) cellChoice {
	type cell struct {
		prefix []string
		gpus   []GPU
	}
	cells := map[string]*cell{}
	var keys []string
	for _, g := range free {
		for d := 0; d <= len(g.Path); d++ {
			key := strings.Join(g.Path[:d], "/")
			c, ok := cells[key]
			if !ok {
				c = &cell{prefix: g.Path[:d]}
				cells[key] = c
				keys = append(keys, key)
			}
			c.gpus = append(c.gpus, g)
		}
	}
	sort.Strings(keys)
	var best *cell
	for _, key := range keys {
		c := cells[key]
		if len(c.gpus) < k {
			continue
		}
		if best == nil || len(c.prefix) > len(best.prefix) ||
			(len(c.prefix) == len(best.prefix) && len(c.gpus) < len(best.gpus)) {
			best = c
		}
	}
	return cellChoice{prefix: best.prefix, gpus: best.gpus}
}

// pick chooses k GPUs of a cell whose paths share the first depth elements.
// When k is smaller than the cell, it fills from the sub-cells with the most
// free GPUs first, so the gang spans as few sub-cells as it can.
func pick(gpus []GPU, k, depth int) []GPU {
	if k == len(gpus) {
		return gpus
	}
	groups := map[string][]GPU{}
	var names []string
	for _, g := range gpus {
		name := ""
		if depth < len(g.Path) {
			name = g.Path[depth]
		}
		if _, ok := groups[name]; !ok {
			names = append(names, name)
		}
		groups[name] = append(groups[name], g)
	}
	if len(names) == 1 && names[0] == "" {
		return gpus[:k] // leaves: lowest indexes
	}
	sort.Slice(names, func(a, b int) bool {
		la, lb := len(groups[names[a]]), len(groups[names[b]])
		if la != lb {
			return la > lb
		}
		return names[a] < names[b]
	})
	var out []GPU
	for _, n := range names {
		need := k - len(out)
		if need == 0 {
			break
		}
		sub := groups[n]
		out = append(out, pick(sub, min(need, len(sub)), depth+1)...)
	}
	return out
}

func ids(gpus []GPU) []string {
	out := make([]string, len(gpus))
	for i, g := range gpus {
		out[i] = g.ID
	}
	return out
}
