package report

import (
	"math"
	"testing"

	"github.com/themis-nomad/themis/planner/sim"
)

// same compares statistics, treating two undefined values as equal and
// allowing for float rounding.
func same(got, want Num) bool {
	if !want.Defined() || !got.Defined() {
		return want.Defined() == got.Defined()
	}
	return math.Abs(float64(got-want)) <= 1e-9*max(1, math.Abs(float64(want)))
}

var nan = undefined()

func TestPercentileNearestRank(t *testing.T) {
	oneToTwenty := make([]float64, 20)
	for i := range oneToTwenty {
		oneToTwenty[i] = float64(i + 1)
	}
	wiki := []float64{15, 20, 35, 40, 50}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   Num
	}{
		{"empty", nil, 50, nan},
		{"single p0", []float64{7}, 0, 7},
		{"single p99", []float64{7}, 99, 7},
		{"wiki p5", wiki, 5, 15},
		{"wiki p30", wiki, 30, 20},
		{"wiki p40", wiki, 40, 20},
		{"wiki p50", wiki, 50, 35},
		{"wiki p100", wiki, 100, 50},
		{"even n median is lower middle", []float64{1, 2, 3, 4}, 50, 2},
		{"1..20 p95 exact rank", oneToTwenty, 95, 19},
		{"1..20 p99", oneToTwenty, 99, 20},
		{"1..20 p50", oneToTwenty, 50, 10},
		{"1..20 p0", oneToTwenty, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); !same(got, tc.want) {
				t.Errorf("percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}

func TestBusyGPUSeconds(t *testing.T) {
	tests := []struct {
		name    string
		util    []sim.UtilSample
		horizon float64
		want    float64
	}{
		{"no samples", nil, 10, 0},
		{"zero horizon", []sim.UtilSample{{T: 0, Busy: 4}}, 0, 0},
		{"last sample holds to horizon", []sim.UtilSample{{T: 0, Busy: 4}}, 10, 40},
		{"steps", []sim.UtilSample{{T: 0, Busy: 2}, {T: 10, Busy: 4}, {T: 20, Busy: 0}}, 30, 60},
		{"unsorted input", []sim.UtilSample{{T: 20, Busy: 0}, {T: 0, Busy: 2}, {T: 10, Busy: 4}}, 30, 60},
		{"late first sample", []sim.UtilSample{{T: 5, Busy: 2}}, 10, 10},
		{"samples past horizon ignored", []sim.UtilSample{{T: 0, Busy: 1}, {T: 8, Busy: 3}, {T: 12, Busy: 9}}, 10, 8 + 6},
		{"equal times: last wins", []sim.UtilSample{{T: 0, Busy: 7}, {T: 0, Busy: 1}}, 10, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := busyGPUSeconds(tc.util, tc.horizon); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("busyGPUSeconds = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFactor(t *testing.T) {
	tests := []struct {
		name        string
		ref, policy Num
		want        Num
	}{
		{"policy twice as fast", 100, 50, 2},
		{"policy twice as slow", 50, 100, 0.5},
		{"equal", 30, 30, 1},
		{"both zero", 0, 0, 1},
		{"policy zero", 5, 0, nan},
		{"reference zero", 0, 5, 0},
		{"reference undefined", nan, 5, nan},
		{"policy undefined", 5, nan, nan},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := factor(tc.ref, tc.policy); !same(got, tc.want) {
				t.Errorf("factor(%v, %v) = %v, want %v", tc.ref, tc.policy, got, tc.want)
			}
		})
	}
}

func TestNumJSON(t *testing.T) {
	tests := []struct {
		in   Num
		want string
	}{
		{0, "0"},
		{Num(math.Copysign(0, -1)), "0"},
		{-0.0001, "0"},
		{1.23456, "1.235"},
		{0.1 + 0.2, "0.3"},
		{12345678.9, "12345678.9"},
		{1e21, "1000000000000000000000"},
		{nan, "null"},
		{Num(math.Inf(1)), "null"},
		{Num(math.Inf(-1)), "null"},
	}
	for _, tc := range tests {
		got, err := tc.in.MarshalJSON()
		if err != nil || string(got) != tc.want {
			t.Errorf("Num(%v).MarshalJSON() = %q, %v; want %q", float64(tc.in), got, err, tc.want)
		}
	}
}
