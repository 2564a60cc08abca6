package sim

import (
	"fmt"
	"math"

	"github.com/themis-nomad/themis/planner/core"
)

// Costs reads the simulator's knobs: sim.checkpoint_s (default 10) and
// sim.restore_s (default 20), the seconds a preempted job loses when it
// resumes.
func Costs(k core.Knobs) (checkpoint, restore float64, err error) {
	if checkpoint, err = k.Float("sim.checkpoint_s", 10); err != nil {
		return 0, 0, err
	}
	if restore, err = k.Float("sim.restore_s", 20); err != nil {
		return 0, 0, err
	}
	if checkpoint < 0 || restore < 0 || math.IsInf(checkpoint+restore, 0) {
		return 0, 0, fmt.Errorf("sim.checkpoint_s = %v, sim.restore_s = %v: want finite numbers of seconds >= 0", checkpoint, restore)
	}
	return checkpoint, restore, nil
}
