package hived

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strconv"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
)

// check recomputes every counter and structural fact of c from scratch and
// returns the first inconsistency, or nil.
func check(c *Cluster) error {
	// Physical counters.
	var phys func(x *cell) (gpus, bad, used, opp, a0, a1 int, err error)
	phys = func(x *cell) (gpus, bad, used, opp, a0, a1 int, err error) {
		if x.isLeaf() {
			gpus = 1
			switch {
			case !x.healthy:
				bad = 1
			case x.job == nil:
				a1 = 1
				if !x.reserved {
					a0 = 1
				}
			}
			if x.job != nil {
				used = 1
				if !x.job.guaranteed() {
					opp = 1
				}
				if c.jobs[x.job.key] != x.job {
					return 0, 0, 0, 0, 0, 0, fmt.Errorf("GPU %s held by unknown job %s", x.name, x.job.key)
				}
			}
		}
		for _, ch := range x.children {
			if ch.parent != x {
				return 0, 0, 0, 0, 0, 0, fmt.Errorf("cell %s: bad parent", ch.name)
			}
			g, b, u, o, z0, z1, e := phys(ch)
			if e != nil {
				return 0, 0, 0, 0, 0, 0, e
			}
			gpus, bad, used, opp, a0, a1 = gpus+g, bad+b, used+u, opp+o, a0+z0, a1+z1
		}
		if [6]int{gpus, bad, used, opp, a0, a1} != [6]int{x.gpus, x.bad, x.used, x.opp, x.avail[0], x.avail[1]} {
			return 0, 0, 0, 0, 0, 0, fmt.Errorf("cell %s: counters gpus/bad/used/opp/avail %d/%d/%d/%d/%v, recomputed %d/%d/%d/%d/[%d %d]",
				x.name, x.gpus, x.bad, x.used, x.opp, x.avail, gpus, bad, used, opp, a0, a1)
		}
		return
	}
	if _, _, _, _, _, _, err := phys(c.root); err != nil {
		return err
	}
	// Buddy state.
	poolBad := 0
	inPool := map[*cell]bool{}
	for ti, s := range c.pool {
		for i, p := range s {
			if !p.inPool || p.poolPos != i || p.typ.idx != ti || p.split || p.alloc || inPool[p] {
				return fmt.Errorf("pool[%s][%d] = %s: inPool %v pos %d split %v alloc %v", c.types[ti].name, i, p.name, p.inPool, p.poolPos, p.split, p.alloc)
			}
			if p.parent != nil && p.parent.typ != nil && !p.parent.split {
				return fmt.Errorf("pool cell %s: its typed parent is not split", p.name)
			}
			inPool[p] = true
			poolBad += p.bad
		}
	}
	if poolBad != c.poolBad {
		return fmt.Errorf("poolBad %d, recomputed %d", c.poolBad, poolBad)
	}
	var buddy func(x *cell, covered, reserved bool) (poolFree int, err error)
	buddy = func(x *cell, covered, reserved bool) (int, error) {
		if x.inPool != inPool[x] {
			return 0, fmt.Errorf("cell %s: inPool flag %v", x.name, x.inPool)
		}
		if x.alloc && (x.bound == nil || x.bound.bound != x || x.typ != x.bound.typ || x.bound.parent != x.bound.vc.root) {
			return 0, fmt.Errorf("cell %s: allocated but not bound to a top cell of its type", x.name)
		}
		if x.alloc != (x.bound != nil && x.bound.parent == x.bound.vc.root) {
			return 0, fmt.Errorf("cell %s: alloc %v but bound to %v", x.name, x.alloc, x.bound != nil)
		}
		if x.pinned && !x.alloc {
			return 0, fmt.Errorf("cell %s: pinned but not allocated", x.name)
		}
		r := reserved || x.alloc
		if x.reserved != r {
			return 0, fmt.Errorf("cell %s: reserved %v, want %v", x.name, x.reserved, r)
		}
		cov := covered || x.inPool || x.alloc
		if x.isLeaf() && !cov {
			return 0, fmt.Errorf("GPU %s is neither free nor allocated", x.name)
		}
		if (x.inPool || x.alloc) && covered {
			return 0, fmt.Errorf("cell %s is free or allocated inside a free or allocated cell", x.name)
		}
		if x.split && (covered || x.inPool || x.alloc || x.typ == nil) {
			return 0, fmt.Errorf("cell %s: split inside a free or allocated cell", x.name)
		}
		if !covered && x.typ != nil && !x.inPool && !x.alloc && !x.split {
			return 0, fmt.Errorf("cell %s: typed, uncovered, and neither free, allocated nor split", x.name)
		}
		pf, kids := 0, 0
		if x.inPool {
			pf = x.gpus
		}
		for _, ch := range x.children {
			f, err := buddy(ch, cov, r)
			if err != nil {
				return 0, err
			}
			pf += f
			if ch.inPool {
				kids++
			}
		}
		if !covered || x.inPool {
			if pf != x.poolFree || kids != x.poolKids {
				return 0, fmt.Errorf("cell %s: poolFree/poolKids %d/%d, recomputed %d/%d", x.name, x.poolFree, x.poolKids, pf, kids)
			}
		}
		if x.split && kids == len(x.children) {
			return 0, fmt.Errorf("cell %s: split, but all its children are free (not merged)", x.name)
		}
		return pf, nil
	}
	if _, err := buddy(c.root, false, false); err != nil {
		return err
	}
	demand := make([]int, len(c.types))
	for _, v := range c.vcs {
		for _, top := range v.tops {
			if top.bound == nil {
				demand[top.typ.idx]++
			}
		}
	}
	if !reflect.DeepEqual(demand, c.demand) {
		return fmt.Errorf("demand %v, recomputed %v", c.demand, demand)
	}
	if !c.feasible() {
		return fmt.Errorf("the VCs' unbound cells no longer fit in the free cells")
	}
	// Virtual cells.
	for _, v := range c.vcs {
		var virt func(x *cell) (gpus, avail, used, doomed int, err error)
		virt = func(x *cell) (gpus, avail, used, doomed int, err error) {
			isTop := x.parent == v.root
			if x != v.root {
				if x.bound != nil && (x.bound.bound != x || x.bound.typ != x.typ) {
					return 0, 0, 0, 0, fmt.Errorf("virtual %s: bad binding", c.vname(x))
				}
				if x.bound != nil && !isTop && (x.parent.bound == nil || x.bound.parent != x.parent.bound) {
					return 0, 0, 0, 0, fmt.Errorf("virtual %s: bound outside its parent's cell", c.vname(x))
				}
			}
			if x.isLeaf() && x != v.root {
				gpus = 1
				if x.job != nil {
					used = 1
					if x.bound == nil || x.bound.job != x.job {
						return 0, 0, 0, 0, fmt.Errorf("virtual %s: used by %s but not bound to its GPU", c.vname(x), x.job.key)
					}
				} else if x.doomed == 0 {
					avail = 1
				}
				if x.doomed > 0 && (x.bound == nil || x.bound.healthy) {
					return 0, 0, 0, 0, fmt.Errorf("virtual %s: doomed but not bound to a bad GPU", c.vname(x))
				}
				doomed = x.doomed
			}
			for _, ch := range x.children {
				g, a, u, d, e := virt(ch)
				if e != nil {
					return 0, 0, 0, 0, e
				}
				gpus, avail, used, doomed = gpus+g, avail+a, used+u, doomed+d
			}
			if gpus != x.gpus || avail != x.avail[0] || avail != x.avail[1] || used != x.used || doomed != x.doomed {
				return 0, 0, 0, 0, fmt.Errorf("virtual %s: gpus/avail/used/doomed %d/%v/%d/%d, recomputed %d/%d/%d/%d",
					c.vname(x), x.gpus, x.avail, x.used, x.doomed, gpus, avail, used, doomed)
			}
			if x != v.root {
				switch {
				case x.pinned && x.bound == nil:
					return 0, 0, 0, 0, fmt.Errorf("virtual %s: pinned but unbound", c.vname(x))
				case isTop && !x.pinned && (x.bound != nil) != (used > 0):
					return 0, 0, 0, 0, fmt.Errorf("virtual %s: top bound %v with %d used GPUs", c.vname(x), x.bound != nil, used)
				case !isTop && (x.bound != nil) != (used+doomed > 0):
					return 0, 0, 0, 0, fmt.Errorf("virtual %s: bound %v with %d used and %d doomed GPUs", c.vname(x), x.bound != nil, used, doomed)
				}
			}
			return
		}
		if _, _, _, _, err := virt(v.root); err != nil {
			return err
		}
	}
	// Jobs.
	for k, j := range c.jobs {
		if j.key != k {
			return fmt.Errorf("job %s recorded as %s", j.key, k)
		}
		for i, p := range j.phys {
			if p.job != j {
				return fmt.Errorf("job %s: its GPU %s is held by %v", k, p.name, p.job)
			}
			if j.guaranteed() && (j.virt[i].job != j || j.virt[i].bound != p) {
				return fmt.Errorf("job %s: virtual GPU %d is not bound to its GPU", k, i)
			}
		}
		if j.guaranteed() && j.v.jobs[k] != j {
			return fmt.Errorf("job %s missing from its VC", k)
		}
	}
	for _, v := range c.vcs {
		for k := range v.jobs {
			if c.jobs[k] == nil {
				return fmt.Errorf("vc %s: unknown job %s", v.name, k)
			}
		}
	}
	return nil
}

// snapshot is the part of a cluster's state that releasing every job must
// restore.
type snapshot struct {
	Physical []CellView
	Pool     [][]string
	Demand   []int
	Virtual  map[string][]CellView
}

func snap(c *Cluster) snapshot {
	s := snapshot{Physical: c.Physical(), Demand: append([]int(nil), c.demand...), Virtual: map[string][]CellView{}}
	for _, p := range c.pool {
		var names []string
		for _, x := range p {
			names = append(names, x.name)
		}
		sort.Strings(names)
		s.Pool = append(s.Pool, names)
	}
	for _, v := range c.vcs {
		s.Virtual[v.name], _ = c.VirtualCells(v.name)
	}
	return s
}

// nodeKinds are the node layouts random clusters are made of.
var nodeKinds = []struct {
	gpus int
	path func(i int) []string
}{
	{8, func(i int) []string { return cluster.NodePath(8, i) }},
	{4, func(i int) []string { return cluster.NodePath(4, i) }},
	{2, func(i int) []string { return cluster.NodePath(2, i) }},
	{1, func(i int) []string { return nil }},
	{8, func(i int) []string { return nil }},                                          // flat
	{4, func(i int) []string { return []string{"socket" + strconv.Itoa(i/2)} }},       // no pairs
	{6, func(i int) []string { return []string{"pair" + strconv.Itoa(i/2)} }},         // 3 pairs
	{3, func(i int) []string { return [][]string{{"pair0"}, {"pair0"}, nil}[i] }},     // mixed: untyped node
	{8, func(i int) []string { return []string{"numa" + strconv.Itoa(i/4), "x"} }},    // collapsible
	{4, func(i int) []string { return []string{"s" + strconv.Itoa(i%2), "p0", "q"} }}, // deep chains
}

// randomNodes builds a small random cluster: 1-3 racks (sometimes none) of
// 1-3 nodes, mostly of one layout per rack.
func randomNodes(rng *rand.Rand) []core.Node {
	var nodes []core.Node
	racks := 1 + rng.Intn(3)
	for r := 0; r < racks; r++ {
		rack := "rack" + strconv.Itoa(r)
		if rng.Intn(10) == 0 {
			rack = ""
		}
		kind := rng.Intn(len(nodeKinds))
		for i, n := 0, 1+rng.Intn(3); i < n; i++ {
			k := kind
			if rng.Intn(6) == 0 {
				k = rng.Intn(len(nodeKinds))
			}
			id := fmt.Sprintf("n%d", len(nodes))
			node := core.Node{ID: id, Name: id, Rack: rack, Schedulable: true}
			for g := 0; g < nodeKinds[k].gpus; g++ {
				node.GPUs = append(node.GPUs, core.GPU{ID: fmt.Sprintf("%s-g%d", id, g), Index: g, Path: nodeKinds[k].path(g), Healthy: true})
			}
			nodes = append(nodes, node)
		}
	}
	return nodes
}

// randomConfig gives nvc VCs random cells that the cluster can hold,
// sometimes up to saturation, sometimes with a pinned cell.
func randomConfig(rng *rand.Rand, nodes []core.Node) *Config {
	base, err := New(nodes, nil)
	if err != nil {
		panic(err)
	}
	nt := len(base.types)
	count := make([]int, nt)
	base.poolCounts(count)
	demand, left := make([]int, nt), make([]int, nt)
	nvc := 1 + rng.Intn(4)
	cfg := &Config{}
	for i := 0; i < nvc; i++ {
		cfg.VCs = append(cfg.VCs, VCConfig{Name: "vc" + strconv.Itoa(i)})
	}
	tries := 4 + rng.Intn(12)
	if rng.Intn(3) == 0 {
		tries = 60
	}
	for ; tries > 0; tries-- {
		t := base.types[rng.Intn(nt)]
		demand[t.idx]++
		if base.carve(count, demand, left) >= 0 {
			demand[t.idx]--
			continue
		}
		v := &cfg.VCs[rng.Intn(nvc)]
		if n := len(v.Cells); n > 0 && v.Cells[n-1].Type == t.name {
			v.Cells[n-1].Count++
		} else {
			v.Cells = append(v.Cells, CellCount{Type: t.name, Count: 1})
		}
	}
	if rng.Intn(4) == 0 {
		x := base.cells[rng.Intn(len(base.cells))]
		if x.typ != nil {
			v := &cfg.VCs[rng.Intn(nvc)]
			v.Pin = append(v.Pin, x.name)
			if _, err := New(nodes, cfg); err != nil {
				v.Pin = nil
			}
		}
	}
	return cfg
}

// privateCluster is Cluster.Private, checked: its virtual cells have the
// shape of the VC's own.
func privateCluster(c *Cluster, vcName string) (*Cluster, error) {
	pc, _, err := c.Private(vcName)
	if pc == nil || err != nil {
		return pc, err
	}
	if got, want := shape(pc.vcs[0].root), shape(c.vcByName[vcName].root); got != want {
		return nil, fmt.Errorf("private cluster of %s: virtual cells %s, want %s", vcName, got, want)
	}
	return pc, nil
}

// shape renders a tree's shape: levels, sizes and fan-outs, preorder.
func shape(x *cell) string {
	s := fmt.Sprintf("%s%d(", x.level, x.gpus)
	for _, ch := range x.children {
		s += shape(ch)
	}
	return s + ")"
}

// lca is the lowest cell holding all the given GPUs of c.
func lca(c *Cluster, gpus []string) *cell {
	var x *cell
	for _, id := range gpus {
		l := c.gpu(id)
		if x == nil {
			x = l
			continue
		}
		for x != l && !isAncestor(x, l) {
			x = x.parent
		}
	}
	return x
}

func key(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }

func allGPUs(a Allocation) []string {
	var out []string
	for _, g := range a.Grants {
		out = append(out, g.GPUs...)
	}
	return out
}
