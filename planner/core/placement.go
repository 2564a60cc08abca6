package core

import (
	"sort"
)

// Place picks GPUs for a gang of k GPUs and takes them from the free set.
//
// A gang that fits on one node goes to the node with the fewest free GPUs
// that can hold it (best fit, which keeps emptier nodes whole for larger
// gangs), and inside the node into the deepest cell of the topology tree
// (NVLink pair, PCIe switch, socket, node) with k free GPUs, the fullest such
// cell first. A larger gang spans nodes: the fewest nodes, inside one rack
// when a rack can hold it. With consolidate, a gang waits rather than take
// more nodes than it would need on the empty cluster (Tiresias's
// consolidation of placement-sensitive jobs). ok is false when the gang cannot be placed now.
func (f *FreeGPUs) Place(job JobKey, k int, consolidate bool) (g Grant, ok bool) {
	return f.PlaceJob(&Job{Key: job, GPUs: k}, consolidate)
}

// PlaceJob is Place for a job with CPU and memory demands too: when the
// cluster accounts them, the job goes on one node that has them free.
func (f *FreeGPUs) PlaceJob(j *Job, consolidate bool) (g Grant, ok bool) {
	job, k := j.Key, j.GPUs
	if k <= 0 || k > f.free {
		return Grant{}, false
	}
	if i := f.bestFitNode(k, j); i >= 0 {
		cell, depth := f.cellOn(i, k)
		chosen := pick(cell, k, depth)
		sort.Slice(chosen, func(a, b int) bool { return chosen[a].Index < chosen[b].Index })
		gpuIDs := ids(chosen)
		f.take(gpuIDs)
		g := Grant{Job: job, Node: f.x.nodes[i].node.ID, GPUs: gpuIDs}
		f.charge(g, j, 1)
		f.remember(&g)
		return g, true
	}
	if f.equalParts {
		if n, per, ok := f.x.Shape(k); ok && n > 1 {
			return f.placeParts(j, n, per)
		}
		return Grant{}, false
	}
	if f.singleNode || f.demands(j) {
		return Grant{}, false
	}
	cands, plan := f.spanPlan(k)
	if !plan.ok {
		return Grant{}, false
	}
	if consolidate && plan.nodes > f.x.MinNodes(k) {
		// The rack that holds the gang needs more nodes than the empty
		// cluster would: take the fewest nodes across racks instead, if
		// that is few enough. (Waiting for a rack to free up could wait
		// forever: on 4-GPU nodes in one rack and 8-GPU nodes in others, a
		// 12-GPU gang only ever fits two 8-GPU nodes of two racks.)
		if cands, plan = f.fewestPlan(k); !plan.ok || plan.nodes > f.x.MinNodes(k) {
			return Grant{}, false
		}
	}
	nodes := f.list(cands, plan)
	g = Grant{Job: job}
	need := k
	for _, i := range nodes {
		n := min(need, f.count[i])
		chosen := pick(f.freeOn(i), n, 0)
		sort.Slice(chosen, func(a, b int) bool { return chosen[a].Index < chosen[b].Index })
		gpuIDs := ids(chosen)
		f.take(gpuIDs)
		g.GPUs = append(g.GPUs, gpuIDs...)
		need -= n
	}
	f.remember(&g)
	return g, true
}

// bestFitNode is the node with the fewest free GPUs that still has k, or -1.
func (f *FreeGPUs) bestFitNode(k int, j *Job) int {
	best := -1
	for i, n := range f.count {
		if n >= k && (best < 0 || n < f.count[best]) && f.fitsOn(i, j) {
			best = i
			if n == k {
				break // an exact fit cannot be beaten
			}
		}
	}
	return best
}

// pick chooses k GPUs of a cell whose paths share the first depth elements.
// When k is smaller than the cell, it fills from the sub-cells with the most
// free GPUs first, so the gang spans as few sub-cells as it can.
func pick(gpus []GPU, k, depth int) []GPU {
	if k == len(gpus) {
		return append([]GPU(nil), gpus...)
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
		return append([]GPU(nil), gpus[:k]...) // leaves: lowest indexes
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
