package hived

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/themis-nomad/themis/planner/core"
)

// cellType is a cell type: the leaf (one GPU), or count cells of one child
// type at a named level. Types are structural: two cells have the same type
// when they sit at the same level and hold the same number of children of
// the same type.
type cellType struct {
	name   string
	level  string
	gpus   int
	child  *cellType // nil for the leaf type
	count  int
	height int // 0 for the leaf
	// inNode: every cell of the type lies within one node.
	inNode bool
	// parents are the types whose child type this is.
	parents []*cellType
	idx     int // position in Cluster.types (height ascending)
	id      int // creation order, for the structural key
	cells   int // physical cells of the type
}

// cell is a node of a physical tree (racks, nodes, the cells inside nodes,
// GPUs) or of a virtual tree (a VC's cells). The placement code (place.go)
// works on both; the other fields belong to one kind or the other.
type cell struct {
	typ      *cellType // nil: an untyped group (children differ in type)
	level    string
	parent   *cell
	children []*cell
	index    int // position among the parent's children
	order    int // preorder position in its tree: ties go to the lower order
	gpus     int // leaves in the subtree
	inNode   bool

	// avail counts the subtree's leaves a placement may take. Physical:
	// [0] healthy idle GPUs outside any VC's bound cell, [1] healthy idle
	// GPUs. Virtual: both count unused GPUs not doomed to bad hardware.
	avail [2]int
	used  int    // leaves held by jobs
	stamp uint32 // marks children taken during one fill
	job   *job   // leaves: the job holding it

	// Physical cells.
	name     string
	aliases  []string
	node     string // the node ID, for cells within one node
	gpuIndex int    // leaves: the GPU's index on its node
	healthy  bool   // leaves
	bad      int    // unhealthy leaves in the subtree
	opp      int    // leaves held by opportunistic jobs
	reserved bool   // inside a cell allocated to a VC (bound top or pin)
	// Buddy state (buddy.go): a typed cell is in the pool (free and whole),
	// split (some cell below it is allocated), allocated to a VC, or inside
	// one of those.
	inPool, split, alloc bool
	pinned               bool // allocated for good to a pin (also on the virtual top)
	poolPos              int  // index in Cluster.pool[typ.idx]
	poolKids             int  // children in the pool
	poolFree             int  // GPUs in pool cells at or below this cell

	// Virtual cells.
	vc     *vc
	doomed int // leaves doomed to bad hardware in the subtree

	// bound is the cell on the other side of the binding, if any.
	bound *cell
}

func (x *cell) isLeaf() bool { return len(x.children) == 0 }

// levelName is the level of a path element: the name without its trailing
// index ("socket0" -> "socket", "numa-1" -> "numa").
func levelName(el string) string {
	l := strings.TrimRight(el, "0123456789")
	l = strings.TrimRight(l, "-_.")
	if l == "" {
		return "cell"
	}
	return l
}

// buildPhysical builds the physical tree of nodes: the cluster, its racks
// (nodes grouped by Rack, in first-seen order; nodes without a rack hang off
// the cluster), the nodes, the cells of their GPUs' paths, the GPUs (sorted
// by index). Cells with one child are merged into it (docs/hived.md, "Cells
// and cell types").
// A GPU is healthy when it is marked so and its node is schedulable.
func buildPhysical(nodes []core.Node, leaf string) (*cell, map[string]*cell, error) {
	root := &cell{level: "cluster", name: "cluster"}
	racks := map[string]*cell{}
	gpus := map[string]*cell{}
	seen := map[string]bool{}
	for ni := range nodes {
		n := &nodes[ni]
		if n.ID == "" {
			return nil, nil, fmt.Errorf("node %d (%q) has no ID", ni, n.Name)
		}
		if seen[n.ID] {
			return nil, nil, fmt.Errorf("node %q is listed twice", n.ID)
		}
		seen[n.ID] = true
		if len(n.GPUs) == 0 {
			continue
		}
		parent := root
		if n.Rack != "" {
			r := racks[n.Rack]
			if r == nil {
				r = &cell{level: "rack", name: n.Rack}
				racks[n.Rack] = r
				root.children = append(root.children, r)
			}
			parent = r
		}
		nc := &cell{level: "node", name: n.ID, node: n.ID}
		parent.children = append(parent.children, nc)
		gs := append([]core.GPU(nil), n.GPUs...)
		sort.SliceStable(gs, func(i, j int) bool { return gs[i].Index < gs[j].Index })
		prefix := map[string]*cell{}
		for _, g := range gs {
			if g.ID == "" {
				return nil, nil, fmt.Errorf("node %q: GPU %d has no ID", n.ID, g.Index)
			}
			if gpus[g.ID] != nil {
				return nil, nil, fmt.Errorf("GPU ID %q is used twice (on %s and %s); GPU IDs must be unique in the cluster", g.ID, gpus[g.ID].node, n.ID)
			}
			cur := nc
			key, name := "", n.ID
			for _, el := range g.Path {
				key += "\x00" + el
				name += "/" + el
				ch := prefix[key]
				if ch == nil {
					ch = &cell{level: levelName(el), name: name, node: n.ID}
					prefix[key] = ch
					cur.children = append(cur.children, ch)
				}
				cur = ch
			}
			l := &cell{level: leaf, name: g.ID, node: n.ID, gpuIndex: g.Index, healthy: g.Healthy && n.Schedulable}
			cur.children = append(cur.children, l)
			gpus[g.ID] = l
		}
	}
	if len(gpus) == 0 {
		return nil, nil, fmt.Errorf("the cluster has no GPUs")
	}
	root = collapse(root)
	root.parent = nil
	order := 0
	finishPhysical(root, &order)
	return root, gpus, nil
}

// collapse replaces every cell that has one child by that child, which
// keeps its own level and name and takes the parent's names as aliases: the
// two hold the same GPUs, so they are one cell.
func collapse(x *cell) *cell {
	for i, ch := range x.children {
		x.children[i] = collapse(ch)
	}
	if len(x.children) == 1 {
		ch := x.children[0]
		ch.aliases = append(ch.aliases, x.name)
		ch.aliases = append(ch.aliases, x.aliases...)
		return ch
	}
	return x
}

// finishPhysical sets parents, positions, sizes and counters.
func finishPhysical(x *cell, order *int) {
	x.order = *order
	*order++
	x.inNode = x.node != ""
	if x.isLeaf() {
		x.gpus = 1
		if x.healthy {
			x.avail = [2]int{1, 1}
		} else {
			x.bad = 1
		}
		return
	}
	for i, ch := range x.children {
		ch.parent, ch.index = x, i
		finishPhysical(ch, order)
		x.gpus += ch.gpus
		x.bad += ch.bad
		x.avail[0] += ch.avail[0]
		x.avail[1] += ch.avail[1]
	}
}

// assignTypes gives every physical cell its structural type (nil for
// untyped groups), names the types and returns them sorted by height, then
// name.
func assignTypes(root *cell, leaf string) []*cellType {
	var types []*cellType
	byKey := map[string]*cellType{}
	leafType := &cellType{name: leaf, level: leaf, gpus: 1, inNode: true}
	types = append(types, leafType)
	var walk func(x *cell)
	walk = func(x *cell) {
		if x.isLeaf() {
			x.typ = leafType
			leafType.cells++
			return
		}
		for _, ch := range x.children {
			walk(ch)
		}
		t0 := x.children[0].typ
		for _, ch := range x.children[1:] {
			if ch.typ != t0 {
				t0 = nil
				break
			}
		}
		if t0 == nil {
			return
		}
		key := x.level + "\x00" + strconv.Itoa(t0.id) + "\x00" + strconv.Itoa(len(x.children))
		t := byKey[key]
		if t == nil {
			t = &cellType{level: x.level, gpus: x.gpus, child: t0, count: len(x.children),
				height: t0.height + 1, inNode: x.inNode, id: len(types)}
			byKey[key] = t
			types = append(types, t)
			t0.parents = append(t0.parents, t)
		}
		t.inNode = t.inNode && x.inNode
		t.cells++
		x.typ = t
	}
	walk(root)
	nameTypes(types)
	sort.SliceStable(types, func(i, j int) bool {
		if types[i].height != types[j].height {
			return types[i].height < types[j].height
		}
		return types[i].name < types[j].name
	})
	for i, t := range types {
		t.idx = i
	}
	return types
}

// nameTypes names types "<level><GPUs>" ("node8", "rack64"), the leaf by its
// level (the GPU type). Where several structures share that name, each gets
// "<level><GPUs>-<count>x<child>" ("rack64-16xnode4", "rack64-8xnode8").
func nameTypes(types []*cellType) {
	base := func(t *cellType) string {
		if t.child == nil {
			return t.level
		}
		return t.level + strconv.Itoa(t.gpus)
	}
	n := map[string]int{}
	for _, t := range types {
		n[base(t)]++
	}
	byHeight := append([]*cellType(nil), types...)
	sort.SliceStable(byHeight, func(i, j int) bool { return byHeight[i].height < byHeight[j].height })
	taken := map[string]bool{}
	for _, t := range byHeight {
		name := base(t)
		if n[name] > 1 && t.child != nil {
			name = fmt.Sprintf("%s-%dx%s", name, t.count, t.child.name)
		}
		for i := 2; taken[name]; i++ { // only for contrived level names
			name = fmt.Sprintf("%s#%d", base(t), i)
		}
		taken[name] = true
		t.name = name
	}
}
