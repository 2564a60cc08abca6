package sim

import (
	"fmt"
	"math"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/stack"
)

// Costs reads the simulator's knobs: sim.checkpoint_s (default 10) and
// sim.restore_s (default 20), the seconds a preempted job loses when it
// resumes; under sim.semantics=tiresias both are 0 and may not be set
// otherwise (the peer preempts for free).
func Costs(k core.Knobs) (checkpoint, restore float64, err error) {
	sem, err := stack.Semantics(k)
	if err != nil {
		return 0, 0, err
	}
	def := [2]float64{10, 20}
	if sem == stack.SemanticsTiresias {
		def = [2]float64{}
	}
	if checkpoint, err = k.Float("sim.checkpoint_s", def[0]); err != nil {
		return 0, 0, err
	}
	if restore, err = k.Float("sim.restore_s", def[1]); err != nil {
		return 0, 0, err
	}
	if sem == stack.SemanticsTiresias && checkpoint+restore != 0 {
		return 0, 0, fmt.Errorf("sim.checkpoint_s = %v, sim.restore_s = %v: sim.semantics=tiresias preempts for free", checkpoint, restore)
	}
	if checkpoint < 0 || restore < 0 || math.IsInf(checkpoint+restore, 0) {
		return 0, 0, fmt.Errorf("sim.checkpoint_s = %v, sim.restore_s = %v: want finite numbers of seconds >= 0", checkpoint, restore)
	}
	return checkpoint, restore, nil
}
