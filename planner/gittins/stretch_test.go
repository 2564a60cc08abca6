package gittins

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Stretch's promise, which the planner's skipping of unchanged rounds
// rests on (policies.Tiresias.SteadyUntil): from a up to the stretch's
// end 1/G falls by exactly the service gained (G stays 0 where it is 0),
// against the brute-force index; and the stretch is as long as it can be
// where it is not cut by a sample: at its end the index, taken on from a,
// no longer matches, or a sample size or a + Δ reaching one is there.
func TestStretch(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	checked := 0
	for range 800 {
		samples := randomSamples(r)
		d := mustNew(t, samples...)
		sorted := slices.Sorted(slices.Values(samples))
		for _, a := range attainedPoints(r, sorted) {
			a = max(a, 0)
			deltas := []float64{math.Inf(1), r.Float64() * (sorted[len(sorted)-1] + 1)}
			for _, s := range sorted {
				if s > a {
					deltas = append(deltas, (s-a)*0.5, s-a)
				}
			}
			for _, delta := range deltas {
				end := d.Stretch(a, delta)
				if !(end > a) {
					t.Fatalf("samples %v: Stretch(%v, %v) = %v, not past a", samples, a, delta, end)
				}
				g := d.Index(a, delta)
				if math.IsInf(end, 1) {
					if g != 0 {
						t.Fatalf("samples %v: Stretch(%v, %v) never ends, but the index is %v, not 0", samples, a, delta, g)
					}
					continue
				}
				// Where it ends, a sample is passed or a + Δ reaches one.
				cut := slices.Contains(sorted, end)
				for _, s := range sorted {
					if s-end <= delta && s-math.Nextafter(end, math.Inf(-1)) > delta {
						cut = true
					}
				}
				if !cut {
					t.Fatalf("samples %v: Stretch(%v, %v) = %v is neither a sample nor where a + Δ reaches one", samples, a, delta, end)
				}
				for _, f := range []float64{0, 0.25, 0.5, 0.999} {
					b := a + f*(end-a)
					if b >= end {
						continue
					}
					want := bruteIndex(samples, b, delta)
					if g == 0 {
						if want != 0 {
							t.Fatalf("samples %v Δ %v: the index is 0 at %v but %v at %v, before the stretch ends at %v", samples, delta, a, want, b, end)
						}
						continue
					}
					if got := 1 / (1/g - (b - a)); !closeTo(got, want, 1e-7) {
						t.Fatalf("samples %v Δ %v: from G(%v) = %v the index at %v is %v, brute force %v (stretch ends at %v)", samples, delta, a, g, b, got, want, end)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d points inside stretches", checked)
}

// The stretches tile the attained service: walking from 0 reaches past
// the largest sample in as many steps as there are cuts, never standing.
func TestStretchWalks(t *testing.T) {
	d := mustNew(t, 10, 10, 20, 35)
	var ends []float64
	for a := 0.0; !math.IsInf(a, 1); a = d.Stretch(a, 12) {
		ends = append(ends, a)
		if len(ends) > 20 {
			t.Fatalf("no end in sight: %v", ends)
		}
	}
	// Cuts at 10, 20, 35 (samples passed) and 8, 23 (a + 12 reaches 20, 35).
	want := []float64{0, 8, 10, 20, 23, 35}
	// (8 as Index rounds it: 20 - 7.999999999999999 is 12 in floating point.)
	if !slices.EqualFunc(ends, want, func(a, b float64) bool { return closeTo(a, b, 1e-15) }) {
		t.Fatalf("walked %v, want %v", ends, want)
	}
	if got := d.Stretch(5, 0); !math.IsInf(got, 1) {
		t.Fatalf("Stretch at Δ = 0 is %v, want +Inf (the index is always 0)", got)
	}
	if got := NewOnline(nil).Stretch(5, 12); !math.IsInf(got, 1) {
		t.Fatalf("Stretch of an empty distribution is %v, want +Inf", got)
	}
}
