package stack

import (
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/sim/peer"
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
	// (package planner/sim/peer). Traces with whole-second times give
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

// buildPeer builds the Tiresias simulator's discipline for a policy name
// (package planner/sim/peer): simulator only, without virtual clusters.
func buildPeer(name string, o Options) (*Stack, error) {
	if o.VCs != nil {
		return nil, fmt.Errorf("sim.semantics=%s has no virtual clusters", SemanticsTiresias)
	}
	p, err := peer.New(name, o.Knobs, trace.LoadSizes)
	if err != nil {
		return nil, err
	}
	return &Stack{Name: name, Policy: p, Caps: p.Capabilities(), Traits: Traits{SimulatorOnly: true}}, nil
}
