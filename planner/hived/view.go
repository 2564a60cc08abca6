package hived

import (
	"fmt"
	"strconv"

	"github.com/themis-nomad/themis/planner/core"
)

// vname is a virtual cell's name: "<vc>/<type>.<i>" for the VC's i-th cell,
// then "/<type>.<j>" for the j-th child, level by level.
func (c *Cluster) vname(x *cell) string {
	if x == x.vc.root {
		return x.vc.name
	}
	return c.vname(x.parent) + "/" + x.typ.name + "." + strconv.Itoa(x.index)
}

func (c *Cluster) name(x *cell) string {
	if x == nil {
		return ""
	}
	if x.vc != nil {
		return c.vname(x)
	}
	return x.name
}

// jobsByCell lists, for every cell above the given leaves, the jobs holding
// them (sorted), keyed by cell.
func (c *Cluster) jobsByCell(virtual *vc) map[*cell][]core.JobKey {
	keys := make([]core.JobKey, 0, len(c.jobs))
	for k, j := range c.jobs {
		if virtual == nil || j.v == virtual {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	out := map[*cell][]core.JobKey{}
	for _, k := range keys {
		j := c.jobs[k]
		leaves := j.phys
		if virtual != nil {
			leaves = j.virt
		}
		for _, l := range leaves {
			for x := l; x != nil; x = x.parent {
				s := out[x]
				if n := len(s); n > 0 && s[n-1] == k {
					break
				}
				out[x] = append(s, k)
			}
		}
	}
	return out
}

func state(x *cell, bad int, reserved bool) CellState {
	switch {
	case bad > 0:
		return StateBad
	case x.used > 0:
		return StateUsed
	case reserved:
		return StateReserved
	}
	return StateFree
}

// Physical describes every physical cell, top-down (preorder).
func (c *Cluster) Physical() []CellView {
	jobs := c.jobsByCell(nil)
	out := make([]CellView, 0, len(c.cells))
	for _, x := range c.cells {
		v := CellView{
			Name:    x.name,
			Aliases: append([]string(nil), x.aliases...),
			Parent:  c.name(x.parent),
			Level:   x.level,
			Node:    x.node,
			GPUs:    x.gpus,
			State:   state(x, x.bad, x.reserved),
			Used:    x.used,
			Bad:     x.bad,
			Bound:   c.name(x.bound),
			Pinned:  x.pinned,
			Jobs:    jobs[x],
		}
		if len(v.Aliases) == 0 {
			v.Aliases = nil
		}
		if x.typ != nil {
			v.Type = x.typ.name
		}
		for a := x; a != nil; a = a.parent {
			if a.alloc {
				v.VC = a.bound.vc.name
				break
			}
		}
		out = append(out, v)
	}
	return out
}

// VirtualCells describes a VC's cells, top-down (preorder), with their
// bindings.
func (c *Cluster) VirtualCells(vcName string) ([]CellView, error) {
	v := c.vcByName[vcName]
	if v == nil {
		return nil, fmt.Errorf("hived: %w %q", ErrUnknownVC, vcName)
	}
	jobs := c.jobsByCell(v)
	var out []CellView
	var walk func(x *cell)
	walk = func(x *cell) {
		cv := CellView{
			Name:   c.vname(x),
			Type:   x.typ.name,
			Level:  x.level,
			GPUs:   x.gpus,
			State:  state(x, x.doomed, x.bound != nil),
			Used:   x.used,
			Bad:    x.doomed,
			VC:     v.name,
			Bound:  c.name(x.bound),
			Pinned: x.pinned,
			Jobs:   jobs[x],
		}
		if x.parent != v.root {
			cv.Parent = c.vname(x.parent)
		}
		if x.bound != nil {
			cv.Node = x.bound.node
		}
		out = append(out, cv)
		for _, ch := range x.children {
			walk(ch)
		}
	}
	for _, top := range v.tops {
		walk(top)
	}
	return out, nil
}

// Types describes the cluster's cell types, smallest first.
func (c *Cluster) Types() []TypeView {
	out := make([]TypeView, len(c.types))
	for i, t := range c.types {
		out[i] = TypeView{Name: t.name, Level: t.level, GPUs: t.gpus, Count: t.count, Cells: t.cells}
		if t.child != nil {
			out[i].Child = t.child.name
		}
	}
	return out
}

// VCs describes the virtual clusters, in configuration order.
func (c *Cluster) VCs() []VCView {
	out := make([]VCView, len(c.vcs))
	for i, v := range c.vcs {
		vv := VCView{Name: v.name, Cells: map[string]int{}, GPUs: v.root.gpus, Used: v.root.used,
			Free: v.root.avail[0], Doomed: v.root.doomed}
		for _, top := range v.tops {
			vv.Cells[top.typ.name]++
		}
		for _, p := range v.pins {
			vv.Pinned = append(vv.Pinned, p.name)
		}
		out[i] = vv
	}
	return out
}

// Config is the configuration the cluster runs.
func (c *Cluster) Config() *Config { return c.cfg }

// Job describes an allocated job.
func (c *Cluster) Job(key core.JobKey) (JobView, bool) {
	j := c.jobs[key]
	if j == nil {
		return JobView{}, false
	}
	return JobView{Job: j.key, VC: j.vcName, Priority: j.prio, Grants: grants(j), Cells: c.virtualGPUs(j)}, true
}

// Jobs describes the allocated jobs, sorted by key.
func (c *Cluster) Jobs() []JobView {
	keys := make([]core.JobKey, 0, len(c.jobs))
	for k := range c.jobs {
		keys = append(keys, k)
	}
	sortKeys(keys)
	out := make([]JobView, len(keys))
	for i, k := range keys {
		out[i], _ = c.Job(k)
	}
	return out
}
