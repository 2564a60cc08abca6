package auction

import (
	"fmt"
	"testing"
)

// The pool fills a bundle that spans machines from its fullest machines
// until one machine holds the rest, and takes the rest by best fit, so
// that fuller machines stay whole.
func TestPoolPlaceBestFitRest(t *testing.T) {
	for _, tc := range []struct {
		layout [][]int
		k      int
		c      Class
		want   string // machines used, in order, with counts
	}{
		{[][]int{{4, 4, 2}}, 2, SameRack, "[r0m2:2]"},                      // fits one machine: the smallest that holds it
		{[][]int{{4, 4, 2}}, 6, SameRack, "[r0m0:4 r0m2:2]"},               // a 4 stays whole
		{[][]int{{4, 3, 2}}, 5, SameRack, "[r0m0:4 r0m2:1]"},               // the rest, 1, from the emptiest machine
		{[][]int{{4, 4, 2}, {8}}, 10, CrossRack, "[r0m0:4 r0m1:4 r0m2:2]"}, // rack r0 holds it
		{[][]int{{4, 2}, {4, 3}}, 12, CrossRack, "[r1m0:4 r1m1:3 r0m0:4 r0m1:1]"},
	} {
		p := newPool(offerOf(tc.layout...))
		b, ok := p.place(tc.k, tc.c)
		if !ok {
			t.Fatalf("%v: place(%d, %v) failed", tc.layout, tc.k, tc.c)
		}
		var got []string
		for _, pt := range b.parts {
			got = append(got, fmt.Sprintf("%s:%d", p.machines[pt.machine].id, len(pt.gpus)))
		}
		if fmt.Sprint(got) != tc.want || b.n != tc.k {
			t.Errorf("%v: place(%d, %v) = %v (%d GPUs), want %s", tc.layout, tc.k, tc.c, got, b.n, tc.want)
		}
	}
}
