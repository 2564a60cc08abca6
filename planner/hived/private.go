package hived

import (
	"fmt"
	"strconv"

	"github.com/themis-nomad/themis/planner/core"
)

// Private builds a VC's private cluster: its cells alone, as physical
// cells of the same shapes, wholly owned (pinned, in the same order) by one
// VC of the same name; and the nodes it is made of. Replaying the VC's jobs
// on it is the baseline that sharing safety is measured against: a
// guaranteed request the private cluster satisfies is satisfied in the
// shared one. A VC that owns no cells has no private cluster (nil, nil).
func (c *Cluster) Private(vcName string) (*Cluster, []core.Node, error) {
	v, ok := c.vcByName[vcName]
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownVC, vcName)
	}
	if len(v.tops) == 0 {
		return nil, nil, nil
	}
	var nodes []core.Node
	var pins []string
	if c.root.typ != nil && v.tops[0].typ == c.root.typ {
		nodes, pins = c.nodes, []string{c.root.name}
	} else {
		for i, top := range v.tops {
			rack := "p" + strconv.Itoa(i)
			switch {
			case top.typ.inNode:
				n := typeNode(top.typ, rack+"-n0", rack)
				nodes = append(nodes, n)
				pins = append(pins, n.ID)
			case top.typ.child.inNode:
				for j := 0; j < top.typ.count; j++ {
					nodes = append(nodes, typeNode(top.typ.child, fmt.Sprintf("%s-n%d", rack, j), rack))
				}
				pins = append(pins, rack)
			default:
				return nil, nil, fmt.Errorf("virtual cluster %q: cannot build a private cell of type %s (above a rack of nodes)", vcName, top.typ.name)
			}
		}
	}
	pc, err := New(nodes, &Config{GPUType: c.cfg.GPUType, VCs: []VCConfig{{Name: vcName, Pin: pins}}})
	if err != nil {
		return nil, nil, fmt.Errorf("virtual cluster %q: private cluster: %w", vcName, err)
	}
	return pc, nodes, nil
}

// typeNode is a node whose GPUs form one cell of type t (t lies within a
// node): the node itself when t is at node level, else a node collapsing to
// its only cell, of type t.
func typeNode(t *cellType, id, rack string) core.Node {
	n := core.Node{ID: id, Name: id, Rack: rack, Schedulable: true}
	var paths [][]string
	var walk func(u *cellType, path []string)
	walk = func(u *cellType, path []string) {
		if u.child == nil {
			paths = append(paths, path)
			return
		}
		for i := 0; i < u.count; i++ {
			p := path
			if u.child.child != nil {
				p = append(append([]string(nil), path...), u.child.level+strconv.Itoa(i))
			}
			walk(u.child, p)
		}
	}
	var start []string
	if t.level != "node" && t.child != nil {
		start = []string{t.level + "0"}
	}
	walk(t, start)
	for i, p := range paths {
		n.GPUs = append(n.GPUs, core.GPU{ID: fmt.Sprintf("%s-g%d", id, i), Index: i, Path: p, Healthy: true})
	}
	return n
}
