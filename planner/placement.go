package planner

import (
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
)

// placementSlowdown is how much slower than on one node a job runs on the
// nodes of its running allocations, as the simulator models it: 1 on one
// node, its Skew across nodes of one rack, its CrossRack (0: Skew) across
// racks. nodes are the nodes Nomad reports, by ID.
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
		return 1
	case sameRack:
		return max(1, j.Skew)
	case j.CrossRack > 0:
		return max(1, j.CrossRack)
	default:
		return max(1, j.Skew)
	}
}
