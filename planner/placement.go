package planner

import (
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
)

// placementSlowdown is how much slower than on one node a job runs on the
// nodes of its running allocations (core.Job.Slowdown, the simulator's
// model). nodes are the nodes Nomad reports, by ID.
func placementSlowdown(j core.Job, allocs []nomad.Alloc, nodes map[string]core.Node) float64 {
	first := ""
	sameNode, sameRack := true, true
	for _, a := range allocs {
		if a.ClientStatus != "running" {
			continue
		}
		switch {
		case first == "":
			first = a.NodeID
		case a.NodeID != first:
			sameNode = false
			if nodes[a.NodeID].Rack != nodes[first].Rack {
				sameRack = false
			}
		}
	}
	switch {
	case sameNode:
		return j.Slowdown(core.OneNode)
	case sameRack:
		return j.Slowdown(core.OneRack)
	default:
		return j.Slowdown(core.Racks)
	}
}
