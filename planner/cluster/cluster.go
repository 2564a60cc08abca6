package cluster

import (
	"fmt"
	"strconv"

	"github.com/themis-nomad/themis/planner/core"
)

// Cluster is a simulated cluster: its nodes, in build (or file) order.
type Cluster struct {
	Name  string
	Nodes []core.Node
}

// TotalGPUs is the number of GPUs on all nodes.
func (c *Cluster) TotalGPUs() int {
	n := 0
	for _, node := range c.Nodes {
		n += len(node.GPUs)
	}
	return n
}

// NodeGroup is Count nodes of GPUsPerNode GPUs each, NodesPerRack to a rack
// (the last rack may hold fewer). NodesPerRack 0 puts the whole group in one
// rack.
type NodeGroup struct {
	Count, GPUsPerNode, NodesPerRack int
}

// MaxGPUs bounds the size of a built cluster, so that a mistyped spec cannot
// exhaust memory.
const MaxGPUs = 1 << 20

// Uniform builds racks x nodesPerRack nodes of gpusPerNode GPUs each.
func Uniform(name string, racks, nodesPerRack, gpusPerNode int) (*Cluster, error) {
	if racks <= 0 || nodesPerRack <= 0 {
		return nil, fmt.Errorf("cluster %q: racks (%d) and nodes per rack (%d) must be positive", name, racks, nodesPerRack)
	}
	if racks > MaxGPUs/nodesPerRack {
		return nil, fmt.Errorf("cluster %q: %d racks x %d nodes is more than %d nodes", name, racks, nodesPerRack, MaxGPUs)
	}
	return Mixed(name, NodeGroup{Count: racks * nodesPerRack, GPUsPerNode: gpusPerNode, NodesPerRack: nodesPerRack})
}

// Mixed builds a cluster of node groups, in order. Each group starts a new
// rack; racks are numbered across groups.
func Mixed(name string, groups ...NodeGroup) (*Cluster, error) {
	if len(groups) == 0 {
		return nil, fmt.Errorf("cluster %q: no node groups", name)
	}
	total, racks, maxPerRack := 0, 0, 0
	for i, g := range groups {
		if g.Count <= 0 || g.GPUsPerNode <= 0 || g.NodesPerRack < 0 {
			return nil, fmt.Errorf("cluster %q: node group %d %+v: count and GPUs per node must be positive, nodes per rack not negative", name, i, g)
		}
		if g.GPUsPerNode > MaxGPUs || g.Count > (MaxGPUs-total)/g.GPUsPerNode {
			return nil, fmt.Errorf("cluster %q: more than %d GPUs", name, MaxGPUs)
		}
		total += g.Count * g.GPUsPerNode
		perRack := g.perRack()
		racks += (g.Count + perRack - 1) / perRack
		maxPerRack = max(maxPerRack, perRack)
	}
	rackWidth, nodeWidth := digits(racks-1), digits(maxPerRack-1)
	c := &Cluster{Name: name}
	rack := 0
	for _, g := range groups {
		perRack := g.perRack()
		for i := 0; i < g.Count; i++ {
			if i > 0 && i%perRack == 0 {
				rack++
			}
			rackName := fmt.Sprintf("rack%0*d", rackWidth, rack)
			nodeName := fmt.Sprintf("%s-n%0*d", rackName, nodeWidth, i%perRack)
			c.Nodes = append(c.Nodes, newNode(nodeName, rackName, g.GPUsPerNode))
		}
		rack++
	}
	return c, nil
}

func (g NodeGroup) perRack() int {
	if g.NodesPerRack == 0 {
		return g.Count
	}
	return g.NodesPerRack
}

// digits is the number of decimal digits of n >= 0.
func digits(n int) int { return len(strconv.Itoa(max(n, 0))) }

func newNode(name, rack string, gpus int) core.Node {
	n := core.Node{ID: name, Name: name, Rack: rack, Schedulable: true, GPUs: make([]core.GPU, gpus)}
	for i := range n.GPUs {
		n.GPUs[i] = core.GPU{ID: name + "-g" + strconv.Itoa(i), Index: i, Path: NodePath(gpus, i), Healthy: true}
	}
	return n
}

// NodePath is the cell path of GPU index in a node of gpusPerNode GPUs,
// outermost first (docs/simulator.md, "Simulated clusters"); nil for node
// sizes without a known layout and for 1-GPU nodes.
func NodePath(gpusPerNode, index int) []string {
	if index < 0 || index >= gpusPerNode {
		return nil
	}
	pair := "pair" + strconv.Itoa(index/2)
	switch gpusPerNode {
	case 8:
		return []string{"socket" + strconv.Itoa(index/4), "switch" + strconv.Itoa(index/2), pair}
	case 4:
		return []string{"socket" + strconv.Itoa(index/2), pair}
	case 2:
		return []string{pair}
	}
	return nil
}
