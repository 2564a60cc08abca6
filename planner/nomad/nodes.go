package nomad

import (
	"fmt"
	"sort"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// NodeFromNomad builds the core's node from a Nomad node's themis device
// groups: instances give IDs and health, the group's layout attribute gives
// each GPU's index and place in the topology tree. ok is false when the node
// has no themis GPUs. A malformed layout is an error naming the node.
func NodeFromNomad(n *api.NodeListStub) (node core.Node, ok bool, err error) {
	node = core.Node{
		ID:          n.ID,
		Name:        n.Name,
		Rack:        topology.DefaultRack,
		Schedulable: n.Status == "ready" && n.SchedulingEligibility == "eligible" && !n.Drain,
	}
	if d := n.Drivers["themis"]; d != nil {
		node.GangAddr = d.Attributes[lease.AttrGangAddress]
	}
	if n.NodeResources == nil {
		return node, false, nil
	}
	for _, d := range n.NodeResources.Devices {
		if d == nil || d.Vendor != topology.Vendor || d.Type != topology.DeviceType {
			continue
		}
		ok = true
		if r := stringAttr(d.Attributes, topology.AttrRack); r != "" {
			node.Rack = r
		}
		layout, err := topology.DecodeLayout(stringAttr(d.Attributes, topology.AttrLayout))
		if err != nil {
			return node, true, fmt.Errorf("node %q device group %s: attribute %q: %w", n.Name, d.ID(), topology.AttrLayout, err)
		}
		byID := make(map[string]topology.LayoutEntry, len(layout))
		for _, e := range layout {
			byID[e.ID] = e
		}
		for _, inst := range d.Instances {
			e, known := byID[inst.ID]
			if !known {
				return node, true, fmt.Errorf("node %q device group %s: GPU %q is missing from the %q attribute", n.Name, d.ID(), inst.ID, topology.AttrLayout)
			}
			node.GPUs = append(node.GPUs, core.GPU{ID: inst.ID, Index: e.Index, Path: e.Cells(), Healthy: inst.Healthy})
		}
	}
	sort.Slice(node.GPUs, func(a, b int) bool { return node.GPUs[a].Index < node.GPUs[b].Index })
	return node, ok, nil
}

func stringAttr(attrs map[string]*api.Attribute, key string) string {
	if a, ok := attrs[key]; ok && a != nil && a.StringVal != nil {
		return *a.StringVal
	}
	return ""
}

// parsedNode is a node as NodeFromNomad parsed it from the stub at
// modifyIndex.
type parsedNode struct {
	modifyIndex uint64
	node        core.Node
	ok          bool
	err         error
}

// nodeFromNomad is NodeFromNomad, parsed again only when the node's stub
// changed (its fingerprint, status, eligibility or drain).
func (c *Client) nodeFromNomad(n *api.NodeListStub) (core.Node, bool, error) {
	if c.lists.always {
		return NodeFromNomad(n)
	}
	if p, ok := c.parsed[n.ID]; ok && p.modifyIndex == n.ModifyIndex && n.ModifyIndex != 0 {
		return p.node, p.ok, p.err
	}
	node, ok, err := NodeFromNomad(n)
	if c.parsed == nil || len(c.parsed) > 2*len(c.lists.nodes)+16 {
		c.parsed = map[string]parsedNode{} // forget removed nodes
	}
	c.parsed[n.ID] = parsedNode{modifyIndex: n.ModifyIndex, node: node, ok: ok, err: err}
	return node, ok, err
}
