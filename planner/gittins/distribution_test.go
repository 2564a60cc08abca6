package gittins

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustNew(t testing.TB, samples ...float64) *Distribution {
	t.Helper()
	d, err := New(samples)
	if err != nil {
		t.Fatalf("New(%v): %v", samples, err)
	}
	return d
}

// closeTo reports whether got is within relative tolerance tol of want
// (infinities and zeros must match exactly).
func closeTo(got, want, tol float64) bool {
	if got == want {
		return true
	}
	if math.IsInf(got, 0) || math.IsInf(want, 0) || math.IsNaN(got) || math.IsNaN(want) {
		return false
	}
	return math.Abs(got-want) <= tol*math.Max(math.Abs(got), math.Abs(want))
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []float64
		want    string
	}{
		{"empty", nil, "no samples"},
		{"negative", []float64{1, -2}, "sample 1: size -2 is negative"},
		{"NaN", []float64{1, 2, math.NaN()}, "sample 2: size is NaN"},
		{"+Inf", []float64{math.Inf(1)}, "sample 0: size +Inf is not finite"},
		{"-Inf", []float64{3, math.Inf(-1)}, "sample 1: size -Inf is not finite"},
		{"overflow", []float64{1e300, 1e300}, "sum to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.samples)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%v) error = %v, want it to contain %q", tc.samples, err, tc.want)
			}
		})
	}
}

func TestNewDoesNotRetain(t *testing.T) {
	s := []float64{4, 3, 2, 1}
	d := mustNew(t, s...)
	s[0] = 100
	if got := d.Index(0, 1); got != 0.25 {
		t.Fatalf("Index after caller mutated samples = %v, want 0.25", got)
	}
	if !slices.Equal(s, []float64{100, 3, 2, 1}) {
		t.Fatalf("New reordered the caller's slice: %v", s)
	}
}

// Hand-computed cases. For {1,2,3,4}:
//
//	a=0,   Δ=1:   P=1/4, E=(1+1+1+1)/4=1          -> 1/4
//	a=0,   Δ=2:   P=2/4, E=(1+2+2+2)/4=7/4        -> 2/7
//	a=0,   Δ=3:   P=3/4, E=(1+2+3+3)/4=9/4        -> 1/3
//	a=0,   Δ=4:   P=1,   E=10/4                   -> 2/5
//	a=1,   Δ=1:   S>1 is {2,3,4}; P=1/3, E=1       -> 1/3
//	a=1.5, Δ=1:   S-a={.5,1.5,2.5}; P=1/3, E=2.5/3 -> 2/5
//	a=1.5, Δ=.5:  P=1/3, E=.5                     -> 2/3
//	a=1.5, Δ=1.5: P=2/3, E=3.5/3                  -> 4/7
//	a=1.5, Δ=2.5: P=1,   E=4.5/3                  -> 2/3
//	a=3.5, Δ=.5:  S>a is {4}; P=1, E=.5           -> 2
func TestIndexHandComputed(t *testing.T) {
	inf := math.Inf(1)
	d1234 := mustNew(t, 4, 2, 3, 1)
	dup := mustNew(t, 2, 10, 2, 2) // {2,2,2,10}
	zeros := mustNew(t, 0, 0, 5)
	for _, tc := range []struct {
		name     string
		d        *Distribution
		a, delta float64
		want     float64
	}{
		{"a=0 Δ=1", d1234, 0, 1, 0.25},
		{"a=0 Δ=2", d1234, 0, 2, 2.0 / 7},
		{"a=0 Δ=2.5 same P as Δ=2, larger E", d1234, 0, 2.5, 0.5 / ((1 + 2 + 2.5 + 2.5) / 4)},
		{"a=0 Δ=3", d1234, 0, 3, 1.0 / 3},
		{"a=0 Δ=4", d1234, 0, 4, 0.4},
		{"a=0 Δ=∞ is 1/E[S]", d1234, 0, inf, 0.4},
		{"a=0 Δ=0.5 nothing finishes", d1234, 0, 0.5, 0},
		{"a=1 excludes S=1", d1234, 1, 1, 1.0 / 3},
		{"a=1.5 Δ=1", d1234, 1.5, 1, 0.4},
		{"a=1.5 Δ=0.5", d1234, 1.5, 0.5, 2.0 / 3},
		{"a=1.5 Δ=1.5", d1234, 1.5, 1.5, 4.0 / 7},
		{"a=1.5 Δ=2.5", d1234, 1.5, 2.5, 2.0 / 3},
		{"a=3.5 Δ=0.5", d1234, 3.5, 0.5, 2},
		{"a=4 outlived every sample", d1234, 4, 1, 0},
		{"a=1e9 outlived every sample", d1234, 1e9, inf, 0},
		{"a<0 counts as 0", d1234, -3, 1, 0.25},
		{"Δ=0", d1234, 0, 0, 0},
		{"Δ<0", d1234, 0, -1, 0},
		{"Δ NaN", d1234, 0, math.NaN(), 0},
		{"a NaN", d1234, math.NaN(), 1, 0},
		{"a=+Inf", d1234, inf, 1, 0},
		{"duplicates Δ=2", dup, 0, 2, 0.75 / 2},
		{"duplicates Δ=∞", dup, 0, inf, 0.25},
		{"duplicates a=2 only 10 left", dup, 2, 8, 1.0 / 8},
		{"zero sizes never exceed a=0", zeros, 0, 5, 0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.Index(tc.a, tc.delta); !closeTo(got, tc.want, 1e-15) {
				t.Fatalf("Index(%v, %v) = %v, want %v", tc.a, tc.delta, got, tc.want)
			}
		})
	}
}

func TestBestIndexHandComputed(t *testing.T) {
	d1234 := mustNew(t, 1, 2, 3, 4)
	for _, tc := range []struct {
		name string
		d    *Distribution
		a    float64
		want float64
	}{
		// Candidates 1/4, 2/7, 1/3, 2/5 (see TestIndexHandComputed).
		{"a=0", d1234, 0, 0.4},
		// Candidates 2/3, 4/7, 2/3.
		{"a=1.5", d1234, 1.5, 2.0 / 3},
		{"a=3.5", d1234, 3.5, 2},
		{"a=4", d1234, 4, 0},
		{"NaN", d1234, math.NaN(), 0},
		// {2,2,2,10}: Δ=2 gives (3/4)/2 = 3/8; Δ=10 gives 1/4.
		{"duplicates", mustNew(t, 2, 2, 2, 10), 0, 0.375},
		// A known size s: index 1/(s-a), SRPT.
		{"point mass", mustNew(t, 8, 8), 6, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.BestIndex(tc.a); !closeTo(got, tc.want, 1e-15) {
				t.Fatalf("BestIndex(%v) = %v, want %v", tc.a, got, tc.want)
			}
		})
	}
}

func TestQuantumFor(t *testing.T) {
	th := []float64{3250, 7200}
	for _, tc := range []struct {
		a, want float64
	}{
		{0, 3250}, {3249.9, 3250}, {3250, 7200}, {7199, 7200}, {7200, math.Inf(1)}, {1e12, math.Inf(1)},
	} {
		if got := QuantumFor(tc.a, th); got != tc.want {
			t.Errorf("QuantumFor(%v, %v) = %v, want %v", tc.a, th, got, tc.want)
		}
	}
	if got := QuantumFor(5, nil); !math.IsInf(got, 1) {
		t.Errorf("QuantumFor with one queue = %v, want +Inf", got)
	}
}

// bruteIndex evaluates the definition directly over the samples.
func bruteIndex(samples []float64, a, delta float64) float64 {
	a = max(a, 0)
	var above, done int
	var served float64
	for _, s := range samples {
		if s <= a {
			continue
		}
		above++
		if r := s - a; r <= delta {
			done++
			served += r
		} else {
			served += delta
		}
	}
	if above == 0 || done == 0 {
		return 0
	}
	p := float64(done) / float64(above)
	e := served / float64(above)
	return p / e
}

// randomSamples draws a small distribution of one of several shapes: uniform,
// heavy-tailed (Pareto, shape 0.5 to 2), integers with many ties, a few
// repeated values, and values with zeros.
func randomSamples(r *rand.Rand) []float64 {
	n := 1 + r.IntN(40)
	out := make([]float64, n)
	kind := r.IntN(5)
	scale := math.Pow(10, float64(r.IntN(9)-2)) // 0.01 .. 1e6
	alpha := 0.5 + 1.5*r.Float64()
	pool := []float64{scale, 2 * scale, 7.5 * scale}
	for i := range out {
		switch kind {
		case 0:
			out[i] = scale * r.Float64()
		case 1:
			out[i] = scale * math.Pow(1-r.Float64(), -1/alpha)
		case 2:
			out[i] = math.Round(10 * r.Float64())
		case 3:
			out[i] = pool[r.IntN(len(pool))]
		default:
			if r.IntN(3) == 0 {
				out[i] = 0
			} else {
				out[i] = math.Round(scale * math.Pow(1-r.Float64(), -1/alpha))
			}
		}
	}
	return out
}

// attainedPoints are the a values worth checking: 0, every support point,
// points just below and above each, midpoints, and random points.
func attainedPoints(r *rand.Rand, sorted []float64) []float64 {
	pts := []float64{0, -1, sorted[len(sorted)-1] * 2}
	for i, s := range sorted {
		pts = append(pts, s, math.Nextafter(s, math.Inf(-1)), math.Nextafter(s, math.Inf(1)), s*r.Float64())
		if i > 0 {
			pts = append(pts, (s+sorted[i-1])/2)
		}
	}
	return pts
}

func TestIndexMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const dists = 1500
	checked := 0
	for range dists {
		samples := randomSamples(r)
		d := mustNew(t, samples...)
		sorted := slices.Sorted(slices.Values(samples))
		for _, a := range attainedPoints(r, sorted) {
			deltas := []float64{math.Inf(1), 1e-9 * (sorted[len(sorted)-1] + 1), r.Float64() * sorted[len(sorted)-1]}
			for _, s := range sorted {
				if s > a {
					deltas = append(deltas, s-max(a, 0), (s-max(a, 0))*1.5)
				}
			}
			for _, delta := range deltas {
				got, want := d.Index(a, delta), bruteIndex(samples, a, delta)
				if !closeTo(got, want, 1e-9) {
					t.Fatalf("samples %v: Index(%v, %v) = %v, brute force %v", samples, a, delta, got, want)
				}
				checked++
			}
		}
	}
	t.Logf("%d distributions, %d (a, Δ) pairs", dists, checked)
}

func TestBestIndexMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const dists = 1500
	for range dists {
		samples := randomSamples(r)
		d := mustNew(t, samples...)
		sorted := slices.Sorted(slices.Values(samples))
		for _, a := range attainedPoints(r, sorted) {
			a0 := max(a, 0)
			// The sup over the support points above a ...
			atSupport := 0.0
			for _, s := range sorted {
				if s > a0 {
					atSupport = max(atSupport, bruteIndex(samples, a0, s-a0))
				}
			}
			got := d.BestIndex(a)
			if !closeTo(got, atSupport, 1e-9) {
				t.Fatalf("samples %v: BestIndex(%v) = %v, brute force over support points %v", samples, a, got, atSupport)
			}
			// ... is the sup over all Δ: no Δ on a fine grid, nor just past a
			// support point, nor ∞, beats it.
			span := sorted[len(sorted)-1] - a0
			if span <= 0 {
				continue
			}
			grid := []float64{math.Inf(1)}
			for k := 1; k <= 200; k++ {
				grid = append(grid, span*float64(k)/150)
			}
			for _, s := range sorted {
				if s > a0 {
					grid = append(grid, math.Nextafter(s-a0, math.Inf(1)), (s-a0)*(1+1e-6))
				}
			}
			for _, delta := range grid {
				if g := bruteIndex(samples, a0, delta); g > got*(1+1e-9) {
					t.Fatalf("samples %v a=%v: Δ=%v gives %v > BestIndex %v", samples, a, delta, g, got)
				}
				if g := d.Index(a, delta); g > got {
					t.Fatalf("samples %v a=%v: Index(Δ=%v) = %v > BestIndex %v", samples, a, delta, g, got)
				}
			}
		}
	}
}

// Invariants of the definition: the index only depends on the samples above
// a, scales as 1/size, and BestIndex is at least the SERPT-like Δ=∞ index
// 1/E[S-a | S>a]. For a known size (a point mass) the index is 1/(s-a) and so
// rises with attained service: Gittins reduces to SRPT.
func TestIndexInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		samples := randomSamples(r)
		d := mustNew(t, samples...)
		sorted := slices.Sorted(slices.Values(samples))
		a := sorted[r.IntN(len(sorted))] * r.Float64()
		delta := r.Float64() * (sorted[len(sorted)-1] + 1)

		var tail []float64
		for _, s := range samples {
			if s > a {
				tail = append(tail, s)
			}
		}
		if len(tail) > 0 {
			dt := mustNew(t, tail...)
			if got, want := dt.Index(a, delta), d.Index(a, delta); !closeTo(got, want, 1e-9) {
				t.Fatalf("samples %v: Index(%v,%v) with samples <= a dropped = %v, want %v", samples, a, delta, got, want)
			}
			if got, want := dt.BestIndex(a), d.BestIndex(a); !closeTo(got, want, 1e-9) {
				t.Fatalf("samples %v: BestIndex(%v) with samples <= a dropped = %v, want %v", samples, a, got, want)
			}
		}

		const c = 8 // a power of two: scaling is exact
		scaled := make([]float64, len(samples))
		for i, s := range samples {
			scaled[i] = c * s
		}
		ds := mustNew(t, scaled...)
		if got, want := ds.Index(c*a, c*delta), d.Index(a, delta)/c; !closeTo(got, want, 1e-12) {
			t.Fatalf("samples %v: scaled Index = %v, want %v", samples, got, want)
		}
		if got, want := ds.BestIndex(c*a), d.BestIndex(a)/c; !closeTo(got, want, 1e-12) {
			t.Fatalf("samples %v: scaled BestIndex = %v, want %v", samples, got, want)
		}

		if b, serpt := d.BestIndex(a), d.Index(a, math.Inf(1)); b < serpt {
			t.Fatalf("samples %v: BestIndex(%v) = %v < Index(a, ∞) = %v", samples, a, b, serpt)
		}
	}

	point := mustNew(t, 100, 100, 100)
	prev := 0.0
	for a := 0.0; a < 100; a += 7 {
		g := point.BestIndex(a)
		if !closeTo(g, 1/(100-a), 1e-15) || g <= prev {
			t.Fatalf("point mass at 100: BestIndex(%v) = %v, want 1/(100-a) = %v, rising", a, g, 1/(100-a))
		}
		prev = g
	}
}
