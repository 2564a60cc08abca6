package hived

import (
	"fmt"
	"sort"
	"strings"

	"github.com/themis-nomad/themis/planner/core"
)

// Cluster is HiveD's layer over one physical cluster: its cells, the
// virtual clusters, and the jobs placed on them. It is not safe for
// concurrent use.
type Cluster struct {
	gpuType string
	nodes   []core.Node // as given, for Reconfigure
	cfg     *Config

	root  *cell
	cells []*cell // physical cells, preorder
	// gpuAt and nameAt find a GPU's leaf and a cell by name (aliases
	// included) in cells; built by New, never changed, shared by clones.
	gpuAt      map[string]int
	nameAt     map[string]int
	types      []*cellType // height ascending
	typeByName map[string]*cellType
	caps       []int // distinct physical cell sizes, ascending

	pool    [][]*cell // per type: the free whole cells (buddy.go)
	poolBad int       // bad GPUs inside pool cells
	demand  []int     // per type: the VCs' unbound lazily bound cells

	vcs      []*vc
	vcByName map[string]*vc
	jobs     map[core.JobKey]*job
	seq      uint64

	// Scratch space, reused to keep allocations off the hot path.
	ints             [][]int
	pathBuf          []*cell
	hostBuf, fillBuf []*cell
	touched          []*cell
	stamp            uint32
	oppSeen          []*job

	// victimCost, when set, is the cost of preempting a job (victims.go).
	victimCost func(core.JobKey) float64
}

// vc is a virtual cluster: a forest of virtual cells under a group root.
type vc struct {
	name string
	idx  int   // position in Cluster.vcs
	root *cell // untyped group; its children are the tops
	// cells are the VC's tree in preorder: cells[i].order == i.
	cells []*cell
	tops  []*cell // the VC's cells: the configured ones, then the pinned ones
	caps  []int   // distinct virtual cell sizes, ascending
	jobs  map[core.JobKey]*job
	pins  []*cell // physical cells pinned to the VC
}

// job is an allocated job.
type job struct {
	key    core.JobKey
	vcName string
	v      *vc // guaranteed jobs only
	prio   int
	seq    uint64
	phys   []*cell // the physical GPUs
	virt   []*cell // guaranteed jobs: the virtual GPUs, parallel to phys
}

func (j *job) guaranteed() bool { return j.prio >= 0 }

// New builds the cells of nodes and the virtual clusters of cfg (nil: no
// VCs, only opportunistic jobs). It fails when the nodes are malformed
// (duplicate node or GPU IDs, no GPUs), when cfg names unknown cell types or
// cells, or when the VCs' cells cannot all be carved from the cluster
// (ErrInfeasible, naming the short type and by how much). A GPU starts
// healthy when GPU.Healthy is set and its node is schedulable.
func New(nodes []core.Node, cfg *Config) (*Cluster, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{gpuType: cfg.gpuType(), cfg: cfg}
	c.nodes = make([]core.Node, len(nodes))
	for i, n := range nodes {
		n.GPUs = append([]core.GPU(nil), n.GPUs...)
		c.nodes[i] = n
	}
	root, gpus, err := buildPhysical(c.nodes, c.gpuType)
	if err != nil {
		return nil, fmt.Errorf("hived: %w", err)
	}
	c.root = root
	c.types = assignTypes(root, c.gpuType)
	c.typeByName = make(map[string]*cellType, len(c.types))
	for _, t := range c.types {
		c.typeByName[t.name] = t
	}
	c.nameAt = map[string]int{}
	var collect func(x *cell)
	collect = func(x *cell) {
		c.cells = append(c.cells, x)
		for _, n := range append([]string{x.name}, x.aliases...) {
			if _, dup := c.nameAt[n]; !dup {
				c.nameAt[n] = x.order
			}
		}
		for _, ch := range x.children {
			collect(ch)
		}
	}
	collect(root)
	c.gpuAt = make(map[string]int, len(gpus))
	for id, l := range gpus {
		c.gpuAt[id] = l.order
	}
	c.caps = sizes(root)
	c.pool = make([][]*cell, len(c.types))
	c.demand = make([]int, len(c.types))
	var roots func(x *cell)
	roots = func(x *cell) {
		if x.typ != nil {
			c.poolAdd(x)
			return
		}
		for _, ch := range x.children {
			roots(ch)
		}
	}
	roots(root)
	c.jobs = map[core.JobKey]*job{}
	if err := c.addVCs(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// gpu is the leaf of the GPU of the given ID, nil if none.
func (c *Cluster) gpu(id string) *cell {
	if i, ok := c.gpuAt[id]; ok {
		return c.cells[i]
	}
	return nil
}

// named is the physical cell of a name or alias, nil if none.
func (c *Cluster) named(name string) *cell {
	if i, ok := c.nameAt[name]; ok {
		return c.cells[i]
	}
	return nil
}

// addVCs resolves the VCs' cell types and pins, checks that they can all be
// carved from the cluster, and builds their virtual cells.
func (c *Cluster) addVCs(cfg *Config) error {
	types := make([][]*cellType, len(cfg.VCs))
	pins := make([][]*cell, len(cfg.VCs))
	asked := map[*cellType][]string{}
	pinnedBy := map[*cell]string{}
	for i, vcfg := range cfg.VCs {
		for _, cc := range vcfg.Cells {
			t := c.typeByName[cc.Type]
			if t == nil {
				return fmt.Errorf("hived: %svc %q: unknown cell type %q; this cluster has %s", at(cc.pos), vcfg.Name, cc.Type, c.typeList())
			}
			types[i] = append(types[i], t)
			c.demand[t.idx] += cc.Count
			asked[t] = append(asked[t], fmt.Sprintf("%s %d", vcfg.Name, cc.Count))
		}
		for _, name := range vcfg.Pin {
			p := c.named(name)
			if p == nil {
				return fmt.Errorf("hived: %svc %q: pin %q: no such cell (pin a rack, node, \"<node>/<path>\" cell or GPU ID)", at(vcfg.pinPos), vcfg.Name, name)
			}
			if p.typ == nil {
				return fmt.Errorf("hived: %svc %q: pin %q: the cell is an untyped group (its children differ in type); pin its children instead", at(vcfg.pinPos), vcfg.Name, name)
			}
			if !c.takeCell(p) {
				other := ""
				for q, by := range pinnedBy {
					if q == p || isAncestor(q, p) || isAncestor(p, q) {
						other = fmt.Sprintf(" (%s, pinned by vc %q)", q.name, by)
						break
					}
				}
				return fmt.Errorf("hived: %svc %q: pin %q overlaps another pinned cell%s", at(vcfg.pinPos), vcfg.Name, name, other)
			}
			pinnedBy[p] = vcfg.Name
			pins[i] = append(pins[i], p)
		}
	}
	nt := len(c.types)
	count, left := make([]int, nt), make([]int, nt)
	c.poolCounts(count)
	if short := c.carve(count, c.demand, left); short >= 0 {
		t := c.types[short]
		avail := left[short] + c.demand[short]
		msg := fmt.Sprintf("cell type %q is short by %d: the VCs ask for %d (%s) but the cluster can give only %d",
			t.name, -left[short], c.demand[short], strings.Join(asked[t], ", "), avail)
		if avail < t.cells {
			msg += fmt.Sprintf(" of its %d once the larger cells asked for", t.cells)
			if len(pinnedBy) > 0 {
				msg += " and the pinned cells"
			}
			msg += " are carved out"
		}
		return fmt.Errorf("hived: %w: %s", ErrInfeasible, msg)
	}
	c.vcByName = map[string]*vc{}
	for i, vcfg := range cfg.VCs {
		v := &vc{name: vcfg.Name, idx: len(c.vcs), jobs: map[core.JobKey]*job{}}
		v.root = &cell{level: "vc", vc: v}
		add := func(top *cell) {
			top.parent, top.index = v.root, len(v.root.children)
			v.root.children = append(v.root.children, top)
			v.tops = append(v.tops, top)
			v.root.gpus += top.gpus
		}
		for k, cc := range vcfg.Cells {
			for n := 0; n < cc.Count; n++ {
				add(c.virtualCell(types[i][k], v))
			}
		}
		for _, p := range pins[i] {
			top := c.virtualCell(p.typ, v)
			top.pinned = true
			add(top)
		}
		v.root.avail = [2]int{v.root.gpus, v.root.gpus}
		v.cells = numberVirtual(v.root, nil)
		v.caps = sizes(v.root)
		v.pins = pins[i]
		k := 0
		for _, top := range v.tops {
			if top.pinned {
				c.attachTop(top, v.pins[k])
				k++
			}
		}
		c.vcs = append(c.vcs, v)
		c.vcByName[v.name] = v
	}
	return nil
}

// virtualCell builds an unbound virtual cell of type t and its subtree.
func (c *Cluster) virtualCell(t *cellType, v *vc) *cell {
	x := &cell{typ: t, level: t.level, vc: v, gpus: t.gpus, inNode: t.inNode}
	x.avail = [2]int{t.gpus, t.gpus}
	if t.child != nil {
		x.children = make([]*cell, t.count)
		for i := range x.children {
			ch := c.virtualCell(t.child, v)
			ch.parent, ch.index = x, i
			x.children[i] = ch
		}
	}
	return x
}

// numberVirtual numbers x's tree in preorder (cell.order), appending each
// cell to out at its number: a VC's cells (vc.cells).
func numberVirtual(x *cell, out []*cell) []*cell {
	x.order = len(out)
	out = append(out, x)
	for _, ch := range x.children {
		out = numberVirtual(ch, out)
	}
	return out
}

// sizes lists the distinct cell sizes in a tree, ascending.
func sizes(root *cell) []int {
	seen := map[int]bool{}
	var walk func(x *cell)
	walk = func(x *cell) {
		seen[x.gpus] = true
		for _, ch := range x.children {
			walk(ch)
		}
	}
	walk(root)
	out := make([]int, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

func (c *Cluster) typeList() string {
	names := make([]string, len(c.types))
	for i, t := range c.types {
		names[i] = fmt.Sprintf("%s (%d)", t.name, t.cells)
	}
	return strings.Join(names, ", ")
}

// at prefixes an error with a config position, when known.
func at(pos string) string {
	if pos == "" {
		return ""
	}
	return pos + ": "
}
