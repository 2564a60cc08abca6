package core

import "testing"

// One slowdown model: 1 on one node, Skew in a rack, CrossRack across
// racks (Skew when unset), never below 1.
func TestSlowdown(t *testing.T) {
	for _, tc := range []struct {
		skew, crossRack float64
		s               Spread
		want            float64
	}{
		{1.2, 1.6, OneNode, 1},
		{1.2, 1.6, OneRack, 1.2},
		{1.2, 1.6, Racks, 1.6},
		{1.2, 0, Racks, 1.2},
		{0, 0, OneRack, 1},
		{0.5, 0.8, Racks, 1},
	} {
		j := Job{Skew: tc.skew, CrossRack: tc.crossRack}
		if got := j.Slowdown(tc.s); got != tc.want {
			t.Errorf("skew %g cross-rack %g spread %d: %g, want %g", tc.skew, tc.crossRack, tc.s, got, tc.want)
		}
	}
}
