package nodesim

import (
	"fmt"
	"strings"

	"github.com/themis-nomad/themis/device/topology"
)

// Cluster is a topology of n nodes of 8 GPUs, perRack nodes to a rack, each
// laid out as examples/topology/dev-node.hcl (2 sockets, each 2 PCIe
// switches, each one NVLink pair of 2 GPUs): nodes "sim-0000", ...,
// racks "rack00", ..., GPU IDs "SIM-<node>-<index>".
func Cluster(n, perRack int) *topology.Topology {
	if perRack <= 0 {
		perRack = n
	}
	t := &topology.Topology{File: fmt.Sprintf("nodesim-%d-nodes", n)}
	for i := range n {
		name := fmt.Sprintf("sim-%04d", i)
		node := topology.Node{Name: name, Rack: fmt.Sprintf("rack%02d", i/perRack)}
		for g := range 8 {
			node.GPUs = append(node.GPUs, topology.GPU{
				Index: g, ID: fmt.Sprintf("SIM-%s-%d", name, g), Model: "SIM-A100-80GB", MemoryMiB: 81920,
				Path:    fmt.Sprintf("socket%d/switch%d/pair%d", g/4, g/2, g/2),
				Healthy: true,
			})
		}
		t.Nodes = append(t.Nodes, node)
	}
	return t
}

// HCL writes t as a topology file (device/topology's format), for a device
// plugin or `themis sim` to read the same cluster.
func HCL(t *topology.Topology) string {
	var b strings.Builder
	for _, n := range t.Nodes {
		fmt.Fprintf(&b, "node %q {\n  rack = %q\n", n.Name, n.Rack)
		for _, g := range n.GPUs {
			fmt.Fprintf(&b, "  gpu {\n    index      = %d\n    id         = %q\n    model      = %q\n    memory_mib = %d\n    path       = %q\n",
				g.Index, g.ID, g.Model, g.MemoryMiB, g.Path)
			if !g.Healthy {
				b.WriteString("    healthy    = false\n")
			}
			b.WriteString("  }\n")
		}
		b.WriteString("}\n")
	}
	return b.String()
}
