package policies

import (
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
)

// The tests build the policies by name here. The binaries build
// them through the registry (planner/stack), the only list of policy names
// outside tests, which adds themis and knob files (tiresias.gittins_dist).

// testNames are this package's policies, in the registry's order.
var testNames = []string{"fifo", "fifo-skip", "srtf", "srsf", "las", "gandiva", "tiresias-las", "tiresias-gittins", "fitgpp", "lrtp", "rand", "optimus", "app-las", "app-srtf", "app-srsf"}

// newPolicy builds one of testNames, refusing knobs of its namespace it did
// not read, as the registry does.
func newPolicy(name string, k core.Knobs) (core.Policy, error) {
	var p core.Policy
	var own []string
	switch name {
	case "fifo":
		p = FIFO{}
	case "fifo-skip":
		p = FIFOSkip{}
	case "srtf":
		p = SRTF{}
	case "srsf":
		p = SRSF{}
	case "las":
		p = LAS{}
	case "gandiva":
		p = Gandiva{}
	case "tiresias-las", "tiresias-gittins":
		t, err := NewTiresias(name == "tiresias-gittins", k)
		if err != nil {
			return nil, err
		}
		p, own = t, []string{"tiresias"}
	case "fitgpp":
		f, err := NewFitGpp(k)
		if err != nil {
			return nil, err
		}
		p, own = f, []string{"fitgpp"}
	case "optimus":
		p = Optimus{}
	case "lrtp":
		p = LRTP{}
	case "rand":
		p = NewRandomPreempt()
	case "app-las":
		p = NewAppLAS()
	case "app-srtf":
		p = NewAppSRTF()
	case "app-srsf":
		p = NewAppSRSF()
	default:
		return nil, fmt.Errorf("policy %q: unknown (known: %v)", name, testNames)
	}
	if err := k.UnusedIn(own...); err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	return p, nil
}
