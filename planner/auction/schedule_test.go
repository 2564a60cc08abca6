package auction

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestPhaseTime(t *testing.T) {
	s := Sensitivity{1, 1.5, 2}
	cases := []struct {
		name  string
		ts    []task
		p     int
		c     Class
		want  float64
		split []int
	}{
		{"paper LPT: 4 jobs on 2 GPUs", []task{{640, 8, 1}, {800, 8, 1}, {800, 8, 1}, {960, 8, 1}}, 2, SameMachine, 1600, []int{0, 1, 0, 1}},
		{"gangs serialised", []task{{400, 2, 2}, {400, 2, 2}}, 3, SameMachine, 400, []int{2, 0}},
		{"gang larger than p", []task{{400, 4, 4}}, 3, SameMachine, math.Inf(1), nil},
		{"no GPUs", []task{{400, 4, 1}}, 0, SameMachine, math.Inf(1), nil},
		{"one job, slowdown beats a 2nd GPU", []task{{100, 4, 1}}, 4, CrossRack, 50, []int{4}},
		{"one job, spreading not worth it", []task{{100, 2, 1}}, 2, CrossRack, 100, []int{1}},
		{"parallel min-makespan", []task{{100, 4, 1}, {300, 4, 1}}, 4, SameMachine, 100, []int{1, 3}},
		{"spare GPU to a job it speeds up", []task{{100, 2, 1}, {300, 4, 1}}, 5, SameMachine, 100, []int{2, 3}},
		{"demand caps", []task{{100, 1, 1}, {300, 1, 1}}, 4, SameMachine, 300, []int{1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, split := phaseTime(tc.ts, tc.p, s, tc.c, true)
			if !near(got, tc.want) {
				t.Errorf("time = %v, want %v", got, tc.want)
			}
			if tc.split != nil && !equalInts(split, tc.split) {
				t.Errorf("split = %v, want %v", split, tc.split)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPhaseTimeOptimal checks the side-by-side split against every split
// of p GPUs on small random phases.
func TestPhaseTimeOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := Sensitivity{1, 1.2, 1.7}
	for trial := 0; trial < 500; trial++ {
		n := 1 + rng.IntN(3)
		ts := make([]task, n)
		gangs := 0
		for i := range ts {
			d := 1 + rng.IntN(4)
			ts[i] = task{float64(1 + rng.IntN(500)), d, 1 + rng.IntN(d)}
			gangs += ts[i].gang
		}
		p := gangs + rng.IntN(5)
		c := Class(rng.IntN(NumClasses))
		got, split := phaseTime(ts, p, s, c, true)
		best := math.Inf(1)
		g := make([]int, n)
		var rec func(i, left int)
		rec = func(i, left int) {
			if i == n {
				m := 0.0
				for k, t := range ts {
					m = math.Max(m, taskTime(t, g[k], s, c))
				}
				best = math.Min(best, m)
				return
			}
			for x := ts[i].gang; x <= min(ts[i].demand, left); x++ {
				g[i] = x
				rec(i+1, left-x)
			}
		}
		rec(0, p)
		if !near(got, best) {
			t.Fatalf("trial %d: %v on %d GPUs (%s): time %v, best %v", trial, ts, p, c, got, best)
		}
		sum, m := 0, 0.0
		for k, x := range split {
			if x < ts[k].gang || x > ts[k].demand {
				t.Fatalf("trial %d: split %v breaks a gang or demand of %v", trial, split, ts)
			}
			sum += x
			m = math.Max(m, taskTime(ts[k], x, s, c))
		}
		if sum > p || m > got*(1+1e-12) {
			t.Fatalf("trial %d: split %v uses %d of %d GPUs, makespan %v > %v", trial, split, sum, p, m, got)
		}
	}
}
