package core

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
)

// refDeepestCell is the map-based search that cellOn replaced (kept as the
// reference it must match): the deepest cell of the free GPUs with at
// least k of them, the fewest among equally deep ones.
func refDeepestCell(free []GPU, k int) (gpus []GPU, depth int) {
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
	return best.gpus, len(best.prefix)
}

// TestCellOnMatchesMaps checks cellOn against the map-based search on
// random nodes: regular trees, uneven paths, and paths whose joined
// prefixes collide ("a/b" against "a","b"; empty names).
func TestCellOnMatchesMaps(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	names := []string{"", "a", "b", "a/b", "s0", "s1"}
	for trial := 0; trial < 3000; trial++ {
		size := 1 + rng.Intn(16)
		n := Node{ID: "n", Name: "n", Schedulable: true}
		for i := 0; i < size; i++ {
			var path []string
			if trial%2 == 0 {
				path = []string{fmt.Sprint("socket", i/4), fmt.Sprint("switch", i/2), fmt.Sprint("pair", i/2)}[:rng.Intn(4)]
			} else {
				for d := rng.Intn(4); d > 0; d-- {
					path = append(path, names[rng.Intn(len(names))])
				}
			}
			n.GPUs = append(n.GPUs, GPU{ID: fmt.Sprint("g", i), Index: size - i, Path: path, Healthy: rng.Intn(8) != 0})
		}
		f := NewFreeGPUs([]Node{n}, nil)
		if len(f.x.nodes) == 0 || f.count[0] == 0 {
			continue
		}
		for s := range f.avail {
			if rng.Intn(3) == 0 && f.avail[s] {
				f.avail[s] = false
				f.count[0]--
				f.free--
			}
		}
		for k := 1; k <= f.count[0]; k++ {
			wantGPUs, wantDepth := refDeepestCell(f.freeOn(0), k)
			gotGPUs, gotDepth := f.cellOn(0, k)
			if gotDepth != wantDepth || !slices.EqualFunc(gotGPUs, wantGPUs, func(a, b GPU) bool { return a.ID == b.ID }) {
				t.Fatalf("trial %d, k %d: cellOn %v at depth %d, maps %v at depth %d", trial, k, gotGPUs, gotDepth, wantGPUs, wantDepth)
			}
		}
	}
}
