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
	total := t.cells
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
