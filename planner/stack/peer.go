package stack

import (
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/trace"
)

// The simulator's semantics (knob sim.semantics): which decision stacks
// Build builds.
const (
	// SemanticsOurs is the default model: placement slowdowns, checkpoint
	// and restore costs, topology-aware placement, our policies.
	SemanticsOurs = "ours"
	// SemanticsTiresias is the Tiresias simulator's model
	// (SymbioticLab/Tiresias, simulator/; docs/tiresias.md): no placement
	// slowdown, free and instantaneous preemption, GPUs counted rather
	// than placed (its "count" scheme), and its disciplines
	// (core.NewPeerPolicy). Traces with whole-second times give
	// integer-second events, as the peer's.
	SemanticsTiresias = "tiresias"
)

// Semantics reads sim.semantics (default SemanticsOurs).
func Semantics(k core.Knobs) (string, error) {
	switch s := k.String("sim.semantics", SemanticsOurs); s {
	case SemanticsOurs, SemanticsTiresias:
		return s, nil
	default:
		return "", fmt.Errorf("sim.semantics = %q: want %s or %s", s, SemanticsOurs, SemanticsTiresias)
	}
}

// preparePeer loads dlas-gpu-gittins's job-size samples.
func preparePeer(p *core.PeerDLAS) error {
	if !p.Gittins() {
		return nil
	}
	if p.DistPath == "" {
		return fmt.Errorf("policy %s: needs tiresias.gittins_dist (the peer's yarn-gput1000.csv)", p.Name())
	}
	sizes, err := trace.LoadSizes(p.DistPath)
	if err != nil {
		return fmt.Errorf("tiresias.gittins_dist: %w", err)
	}
	p.SetSizes(sizes)
	return nil
}

// buildPeer builds the Tiresias simulator's discipline for a policy name
// (core.NewPeerPolicy): simulator only, without virtual clusters.
func buildPeer(name string, o Options) (*Stack, error) {
	if o.VCs != nil {
		return nil, fmt.Errorf("sim.semantics=%s has no virtual clusters", SemanticsTiresias)
	}
	p, err := core.NewPeerPolicy(name, o.Knobs)
	if err != nil {
		return nil, err
	}
	if d, ok := p.(*core.PeerDLAS); ok {
		if err := preparePeer(d); err != nil {
			return nil, err
		}
	}
	return &Stack{Name: name, Policy: p, Caps: Capabilities{Preempts: p.Preemptive(), SimulatorOnly: true}}, nil
}
