package core

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
)

// refSpanNodes and refFewestNodes are the sorting implementations that
// spanPlan and fewestPlan replaced (kept as the reference they must match).
func refSpanNodes(f *FreeGPUs, k int) []int {
	byRack := map[string][]int{}
	var racks []string
	for i, n := range f.count {
		if n == 0 {
			continue
		}
		r := f.x.nodes[i].node.Rack
		if _, ok := byRack[r]; !ok {
			racks = append(racks, r)
		}
		byRack[r] = append(byRack[r], i)
	}
	sort.Strings(racks)
	var best []int
	bestLeft := 0
	for _, r := range racks {
		nodes, left := refGreedy(f, byRack[r], k)
		if nodes != nil && (best == nil || len(nodes) < len(best) || (len(nodes) == len(best) && left < bestLeft)) {
			best, bestLeft = nodes, left
		}
	}
	if best != nil {
		return best
	}
	var all []int
	for _, r := range racks {
		all = append(all, byRack[r]...)
	}
	best, _ = refGreedy(f, all, k)
	return best
}

func refFewestNodes(f *FreeGPUs, k int) []int {
	var all []int
	for i, n := range f.count {
		if n > 0 {
			all = append(all, i)
		}
	}
	nodes, _ := refGreedy(f, all, k)
	return nodes
}

func refGreedy(f *FreeGPUs, cands []int, k int) ([]int, int) {
	c := append([]int(nil), cands...)
	sort.SliceStable(c, func(a, b int) bool { return f.count[c[a]] > f.count[c[b]] })
	sum := 0
	for n, i := range c {
		sum += f.count[i]
		if sum >= k {
			return c[:n+1], sum - k
		}
	}
	return nil, 0
}

// TestSpanPlanMatchesSort checks the histogram greedy against the sorting
// one on random clusters (racks, node sizes, free GPUs) and gang sizes.
func TestSpanPlanMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 2000; trial++ {
		var nodes []Node
		nn := 1 + rng.Intn(24)
		racks := 1 + rng.Intn(4)
		for i := 0; i < nn; i++ {
			size := []int{1, 2, 4, 8, 8, 16, 70}[rng.Intn(7)]
			n := Node{ID: fmt.Sprint("n", i), Name: fmt.Sprintf("node%02d", rng.Intn(100)), Rack: fmt.Sprint("r", rng.Intn(racks)), Schedulable: true}
			for g := 0; g < size; g++ {
				n.GPUs = append(n.GPUs, GPU{ID: fmt.Sprint(i, "-", g), Index: g, Healthy: true})
			}
			nodes = append(nodes, n)
		}
		f := newFreeGPUs(NewClusterIndex(nodes), nil, nil)
		for i := range f.count {
			f.count[i] = rng.Intn(len(f.x.nodes[i].gpus) + 1)
		}
		for _, k := range []int{1, 2, 3, 5, 8, 9, 12, 16, 17, 33, 64, 100, 1 + rng.Intn(200)} {
			want := refSpanNodes(f, k)
			cands, p := f.spanPlan(k)
			var got []int
			if p.ok {
				got = f.list(cands, p)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d, k %d, free %v: spanPlan %v, sorting %v", trial, k, f.count, got, want)
			}
			want = refFewestNodes(f, k)
			cands, p = f.fewestPlan(k)
			got = nil
			if p.ok {
				got = f.list(cands, p)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d, k %d, free %v: fewestPlan %v, sorting %v", trial, k, f.count, got, want)
			}
		}
	}
}
