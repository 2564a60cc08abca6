package device

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/themis-nomad/themis/device/topology"
)

// simBackend reports the GPUs of one node of a topology file. It holds no
// state but the file and node names: every call re-reads the file.
type simBackend struct {
	file string
	node string
	now  func() time.Time
}

// newSimBackend loads file once to check it and to resolve node: an empty
// node selects the file's only node, and is an error when it has several.
func newSimBackend(file, node string, now func() time.Time) (*simBackend, error) {
	if file == "" {
		return nil, fmt.Errorf(`backend %q: topology_file is required`, BackendSim)
	}
	topo, err := topology.Load(file)
	if err != nil {
		return nil, err
	}
	names := topo.NodeNames()
	switch {
	case node == "" && len(names) == 1:
		node = names[0]
	case node == "":
		return nil, fmt.Errorf("topology file %q has %d nodes (%s): set node to one of them",
			file, len(names), strings.Join(names, ", "))
	default:
		if _, ok := topo.Node(node); !ok {
			return nil, fmt.Errorf("node %q is not in topology file %q, which has: %s",
				node, file, strings.Join(names, ", "))
		}
	}
	return &simBackend{file: file, node: node, now: now}, nil
}

func (s *simBackend) Name() string { return BackendSim }

func (s *simBackend) Fingerprint(ctx context.Context) (*Inventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	topo, err := topology.Load(s.file)
	if err != nil {
		return nil, err
	}
	node, ok := topo.Node(s.node)
	if !ok {
		return nil, fmt.Errorf("node %q is no longer in topology file %q, which has: %s",
			s.node, s.file, strings.Join(topo.NodeNames(), ", "))
	}
	return &Inventory{Node: node.Name, Rack: node.Rack, GPUs: node.GPUs}, nil
}

// Stats reports each simulated GPU's memory as all free: nothing runs on a
// simulated GPU, and Simulated says so.
func (s *simBackend) Stats(ctx context.Context) ([]GPUStats, error) {
	inv, err := s.Fingerprint(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	stats := make([]GPUStats, len(inv.GPUs))
	for i, g := range inv.GPUs {
		stats[i] = GPUStats{
			ID:             g.ID,
			Model:          g.Model,
			MemoryTotalMiB: g.MemoryMiB,
			Simulated:      true,
			Timestamp:      now,
		}
	}
	return stats, nil
}
