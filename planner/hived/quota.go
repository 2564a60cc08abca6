package hived

import (
	"fmt"
	"math"
	"sort"

	"github.com/themis-nomad/themis/planner/core"
)

// QuotaCells splits the cluster's cells of one type among VCs in proportion
// to their demand (largest remainder), so that a tool can write a VC config
// from, say, each tenant's share of a trace. Every VC with positive demand
// gets at least one cell if there are enough cells (taken from the VC with
// the most). VCs with zero demand get zero. The result has an entry per VC.
func QuotaCells(demand map[string]float64, nodes []core.Node, cellType string) (map[string]int, error) {
	c, err := New(nodes, nil)
	if err != nil {
		return nil, err
	}
	t := c.typeByName[cellType]
	if t == nil {
		return nil, fmt.Errorf("hived: unknown cell type %q; this cluster has %s", cellType, c.typeList())
	}
	return splitProportionally(demand, t.cells)
}

// QuotaMix splits the GPUs of all the cluster's cells of the given types
// among VCs in proportion to their demand, and expresses each VC's share in
// those cells: shares are counted in units of the types' greatest common
// GPU count (largest remainder, every VC with demand at least one unit),
// then each VC, the largest share first, takes the largest cells that fit
// its share while there are any, and smaller ones for the rest. It fails
// when the shares cannot be made of the cells there are.
func QuotaMix(demand map[string]float64, nodes []core.Node, types []string) (map[string][]CellCount, error) {
	c, err := New(nodes, nil)
	if err != nil {
		return nil, err
	}
	var ts []*cellType
	unit, units := 0, 0
	for _, name := range types {
		t := c.typeByName[name]
		if t == nil {
			return nil, fmt.Errorf("hived: unknown cell type %q; this cluster has %s", name, c.typeList())
		}
		ts = append(ts, t)
		unit = gcd(unit, t.gpus)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("hived: no cell types to split")
	}
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].gpus > ts[j].gpus })
	left := make([]int, len(ts))
	for i, t := range ts {
		left[i] = t.cells
		units += t.cells * t.gpus / unit
	}
	share, err := splitProportionally(demand, units)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(share))
	for n := range share {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if share[names[i]] != share[names[j]] {
			return share[names[i]] > share[names[j]]
		}
		return names[i] < names[j]
	})
	out := make(map[string][]CellCount, len(names))
	for _, n := range names {
		rest := share[n]
		for i, t := range ts {
			size := t.gpus / unit
			k := min(rest/size, left[i])
			if k > 0 {
				out[n] = append(out[n], CellCount{Type: t.name, Count: k})
				left[i] -= k
				rest -= k * size
			}
		}
		if rest > 0 {
			return nil, fmt.Errorf("hived: vc %q: %d GPUs of its share do not fit the cells left of types %v", n, rest*unit, types)
		}
	}
	return out, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// splitProportionally splits total units among the VCs with demand, by
// largest remainder, giving every VC with demand at least one unit (taken
// from the VC with the most) when there are enough units.
func splitProportionally(demand map[string]float64, total int) (map[string]int, error) {
	names := make([]string, 0, len(demand))
	sum := 0.0
	for name, d := range demand {
		if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
			return nil, fmt.Errorf("hived: vc %q: demand %v must be a finite number >= 0", name, d)
		}
		names = append(names, name)
		sum += d
	}
	sort.Strings(names)
	out := make(map[string]int, len(names))
	for _, n := range names {
		out[n] = 0
	}
	if sum == 0 || math.IsInf(sum, 0) {
		return out, nil
	}
	frac := make(map[string]float64, len(names))
	given := 0
	for _, n := range names {
		exact := demand[n] / sum * float64(total)
		out[n] = int(math.Floor(exact))
		frac[n] = exact - math.Floor(exact)
		given += out[n]
	}
	byFrac := append([]string(nil), names...)
	sort.SliceStable(byFrac, func(i, j int) bool { return frac[byFrac[i]] > frac[byFrac[j]] })
	for i := 0; given < total && i < len(byFrac); i++ {
		out[byFrac[i]]++
		given++
	}
	positive := 0
	for _, n := range names {
		if demand[n] > 0 {
			positive++
		}
	}
	if total < positive {
		return out, nil
	}
	for _, n := range names {
		if demand[n] == 0 || out[n] > 0 {
			continue
		}
		richest := ""
		for _, m := range names {
			if out[m] > 1 && (richest == "" || out[m] > out[richest]) {
				richest = m
			}
		}
		if richest == "" {
			break
		}
		out[richest]--
		out[n]++
	}
	return out, nil
}
