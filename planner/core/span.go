package core

import "sort"

// A gang larger than any node's free GPUs spans nodes (spanNodes). The
// nodes are chosen greedily, most free GPUs first (ties in candidate
// order), until the gang is covered. A node's free GPUs are a small
// integer (at most the largest node's GPUs), so the greedy choice is worked
// out from a histogram of the candidates' free counts, without sorting or
// allocating; only a choice that is taken is listed. Simulations try to
// place the same blocked gangs round after round: this is their hot path.

// rackIndex is the racks of the indexed nodes, by rack name, each with its
// nodes in index order (built with the ClusterIndex).
type rackIndex struct {
	racks [][]int
	// all is every rack's nodes, rack after rack: the candidates of a
	// gang across racks.
	all []int
}

func newRackIndex(nodes []indexedNode) rackIndex {
	byRack := map[string][]int{}
	var names []string
	for i, n := range nodes {
		r := n.node.Rack
		if _, ok := byRack[r]; !ok {
			names = append(names, r)
		}
		byRack[r] = append(byRack[r], i)
	}
	sort.Strings(names)
	var x rackIndex
	for _, r := range names {
		x.racks = append(x.racks, byRack[r])
		x.all = append(x.all, byRack[r]...)
	}
	return x
}

// greedyPlan is the greedy choice of nodes for a gang, in numbers: nodes
// nodes, left free GPUs left over on the last one; it takes every candidate
// with more than level free GPUs and the first m with exactly level. ok is
// false when the candidates have fewer free GPUs than the gang.
type greedyPlan struct {
	nodes, left, level, m int
	ok                    bool
}

// plan is the greedy choice among cands for a gang of k GPUs.
func (f *FreeGPUs) plan(cands []int, k int) greedyPlan {
	hist := f.scratch(f.x.largest + 1)
	total := 0
	for _, i := range cands {
		c := f.count[i]
		hist[c]++
		total += c
	}
	if total < k || k <= 0 {
		return greedyPlan{}
	}
	sum, nodes := 0, 0
	for c := f.x.largest; c >= 1; c-- {
		if hist[c] == 0 {
			continue
		}
		if sum+c*hist[c] >= k {
			m := (k - sum + c - 1) / c
			return greedyPlan{nodes: nodes + m, left: sum + m*c - k, level: c, m: m, ok: true}
		}
		sum += c * hist[c]
		nodes += hist[c]
	}
	return greedyPlan{} // not reached: total >= k
}

// list is the nodes of a plan among cands, most free GPUs first.
func (f *FreeGPUs) list(cands []int, p greedyPlan) []int {
	out := make([]int, 0, p.nodes)
	for c := f.x.largest; c > p.level; c-- {
		for _, i := range cands {
			if f.count[i] == c {
				out = append(out, i)
			}
		}
	}
	for _, i := range cands {
		if len(out) == p.nodes {
			break
		}
		if f.count[i] == p.level {
			out = append(out, i)
		}
	}
	return out
}

// spanPlan chooses nodes for a gang larger than any node's free GPUs: the
// fewest nodes (most free first), within one rack if one can hold the gang
// (the rack needing the fewest nodes, then with the least left over, the
// first by name on a tie), else across racks. It returns the candidates the
// plan is among; ok is false when the cluster has fewer than k free GPUs.
func (f *FreeGPUs) spanPlan(k int) ([]int, greedyPlan) {
	var best greedyPlan
	var bestRack []int
	for _, r := range f.x.racks.racks {
		p := f.plan(r, k)
		if p.ok && (!best.ok || p.nodes < best.nodes || (p.nodes == best.nodes && p.left < best.left)) {
			best, bestRack = p, r
		}
	}
	if best.ok {
		return bestRack, best
	}
	return f.x.racks.all, f.plan(f.x.racks.all, k)
}

// fewestPlan is the fewest nodes of any racks that hold k free GPUs, most
// free first, nodes in index order on ties.
func (f *FreeGPUs) fewestPlan(k int) ([]int, greedyPlan) {
	return f.x.order, f.plan(f.x.order, k)
}

// scratch is n zeroed ints of f's own, reused by the placements of one
// round (each use is done with them before the next).
func (f *FreeGPUs) scratch(n int) []int {
	f.buf = zeroed(f.buf, n)
	return f.buf
}
