// Placement classes and the slowdown a model suffers in each.

package auction

import (
	"fmt"
	"math"
)

// Class is how spread an allocation's GPUs are (section 4.3.1 and its
// footnote 3): all on one machine, on several machines of one rack, or on
// several racks. Classes are ordered: a higher class is never faster.
type Class uint8

const (
	// SameMachine: all GPUs on one machine.
	SameMachine Class = iota
	// SameRack: several machines of one rack.
	SameRack
	// CrossRack: machines of several racks.
	CrossRack
)

// NumClasses is the number of placement classes.
const NumClasses = 3

var classNames = [NumClasses]string{"machine", "rack", "cross-rack"}

func (c Class) String() string {
	if int(c) < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// Sensitivity is the slowdown S(G) per placement class (Equation 1): the
// factor by which a job's iteration time grows when its GPUs are spread that
// far. Section 4.3.1, footnote 3, starts from 1 on one machine, 1.1 across
// machines and 1.3 across racks and refines the values by profiling; callers
// pass per-model values (the simulator's model classes). A one-GPU job is
// always on one machine and runs at S[SameMachine].
type Sensitivity [NumClasses]float64

// DefaultSensitivity is footnote 3's starting estimate.
var DefaultSensitivity = Sensitivity{1, 1.1, 1.3}

// Validate reports whether every factor is positive and finite and the
// factors do not decrease as the placement spreads.
func (s Sensitivity) Validate() error {
	for c, v := range s {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("slowdown %s = %v: want a positive number", Class(c), v)
		}
		if c > 0 && v < s[c-1] {
			return fmt.Errorf("slowdown %s = %v is below %s = %v: spreading a job never speeds it up", Class(c), v, Class(c-1), s[c-1])
		}
	}
	return nil
}

// slowdown is S for a gang of g GPUs placed at class c.
func (s Sensitivity) slowdown(g int, c Class) float64 {
	if g <= 1 {
		return s[SameMachine]
	}
	return s[c]
}
