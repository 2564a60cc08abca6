package workload

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// integrate is Simpson's rule on [a, b] with n (even) intervals: an
// independent check of the closed-form moments.
func integrate(f func(float64) float64, a, b float64, n int) float64 {
	h := (b - a) / float64(n)
	sum := f(a) + f(b)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		sum += w * f(a+float64(i)*h)
	}
	return sum * h / 3
}

// numericMoments are the truncated normal's mean and standard deviation by
// numeric integration of the normal density over [lo, hi] (infinite bounds
// cut 12 sd from the mean).
func numericMoments(d TruncNormal) (mean, sd float64) {
	lo, hi := max(d.Lo, d.Mean-12*d.SD), min(d.Hi, d.Mean+12*d.SD)
	pdf := func(x float64) float64 { z := (x - d.Mean) / d.SD; return math.Exp(-z * z / 2) }
	const n = 200000
	z := integrate(pdf, lo, hi, n)
	m := integrate(func(x float64) float64 { return x * pdf(x) }, lo, hi, n) / z
	v := integrate(func(x float64) float64 { return (x - m) * (x - m) * pdf(x) }, lo, hi, n) / z
	return m, math.Sqrt(v)
}

func TestTruncNormalSampler(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name string
		d    TruncNormal
		// shifted: truncation moves the mean by more than the test's
		// tolerance, so a sampler that ignored the bounds would fail.
		shifted bool
	}{
		{"TE execution time", TruncNormal{300, 600, 60, 1800}, true},
		{"BE execution time", TruncNormal{1800, 3600, 60, 86400}, true},
		{"grace period", TruncNormal{180, 180, 0, 1200}, true},
		{"half normal", TruncNormal{0, 1, 0, inf}, true},
		{"untruncated", TruncNormal{5, 2, -inf, inf}, false},
		{"right tail, mirrored", TruncNormal{0, 1, 3, 5}, true},
		{"far right tail", TruncNormal{10, 1, 18, 19}, true},
		{"far left tail", TruncNormal{-10, 1, -19, -18}, true},
		{"narrow, nearly uniform", TruncNormal{10, 100, 0, 1}, true},
		{"asymmetric", TruncNormal{4, 4, 0.5, 8.5}, true},
	}
	const n = 200_000
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.d.Sampler()
			if err != nil {
				t.Fatal(err)
			}
			wantMean, wantSD := numericMoments(c.d)
			if got := s.Expected(); math.Abs(got-wantMean) > 1e-6*max(1, math.Abs(wantMean)) {
				t.Errorf("Expected() = %.9g, numeric integration gives %.9g", got, wantMean)
			}
			if got := s.StdDev(); math.Abs(got-wantSD) > 1e-5*max(1, wantSD) {
				t.Errorf("StdDev() = %.9g, numeric integration gives %.9g", got, wantSD)
			}
			r := rand.New(rand.NewPCG(uint64(i), 7))
			xs := make([]float64, n)
			sum := 0.0
			for k := range xs {
				x := s.Sample(r)
				if x < c.d.Lo || x > c.d.Hi || math.IsNaN(x) {
					t.Fatalf("sample %d = %g, outside [%g, %g]", k, x, c.d.Lo, c.d.Hi)
				}
				xs[k] = x
				sum += x
			}
			// Five standard errors: a correct sampler fails with
			// probability below 1e-6 (and the seed is fixed).
			tol := 5 * wantSD / math.Sqrt(n)
			if c.shifted && math.Abs(wantMean-c.d.Mean) <= tol {
				t.Fatalf("bad case: truncation moves the mean by %g, within the tolerance %g", wantMean-c.d.Mean, tol)
			}
			if got := sum / n; math.Abs(got-wantMean) > tol {
				t.Errorf("sample mean %.6g, want %.6g ± %.3g", got, wantMean, tol)
			}
			// Kolmogorov-Smirnov against the CDF, at the 0.1% level.
			slices.Sort(xs)
			ks := 0.0
			for k, x := range xs {
				f := s.CDF(x)
				ks = max(ks, math.Abs(f-float64(k)/n), math.Abs(float64(k+1)/n-f))
			}
			if crit := 1.95 / math.Sqrt(n); ks > crit {
				t.Errorf("Kolmogorov-Smirnov distance %.4g > %.4g", ks, crit)
			}
		})
	}
}

func TestTruncNormalConstant(t *testing.T) {
	s, err := TruncNormal{Mean: 7, SD: 0, Lo: 0, Hi: 10}.Sampler()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		if x := s.Sample(r); x != 7 {
			t.Fatalf("constant sampler drew %g, want 7", x)
		}
	}
	if s.Expected() != 7 || s.StdDev() != 0 {
		t.Errorf("Expected %g, StdDev %g; want 7, 0", s.Expected(), s.StdDev())
	}
}

// Sample must use exactly one 64-bit draw, so that streams stay aligned.
func TestTruncNormalOneDrawPerSample(t *testing.T) {
	for _, d := range []TruncNormal{{0, 1, -1, 1}, {0, 1, 3, 5}, {5, 0, 5, 5}} {
		s, err := d.Sampler()
		if err != nil {
			t.Fatal(err)
		}
		r, ref := rand.New(rand.NewPCG(3, 4)), rand.New(rand.NewPCG(3, 4))
		for range 1000 {
			s.Sample(r)
			ref.Uint64()
		}
		if r.Uint64() != ref.Uint64() {
			t.Errorf("%v: Sample does not use exactly one draw", d)
		}
	}
}

func TestTruncNormalInvalid(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		d    TruncNormal
		want string
	}{
		{TruncNormal{nan, 1, 0, 1}, "mean must be a finite number"},
		{TruncNormal{inf, 1, 0, 1}, "mean must be a finite number"},
		{TruncNormal{0, -1, 0, 1}, "standard deviation"},
		{TruncNormal{0, inf, 0, 1}, "standard deviation"},
		{TruncNormal{0, 1, nan, 1}, "bounds"},
		{TruncNormal{0, 1, inf, inf}, "bounds"},
		{TruncNormal{0, 1, 1, 1}, "lo must be below hi"},
		{TruncNormal{0, 1, 2, 1}, "lo must be below hi"},
		{TruncNormal{0, 0, 1, 2}, "mean must lie within"},
		{TruncNormal{0, 1, 40, 41}, "too far in the normal's tail"},
		{TruncNormal{0, 1, -41, -40}, "too far in the normal's tail"},
	}
	for _, c := range cases {
		err := c.d.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.d, err, c.want)
		}
	}
}

func TestWholeSampler(t *testing.T) {
	cases := []struct {
		name          string
		d             TruncNormal
		capacity, min float64
		lo, hi        float64 // the counts drawn
	}{
		{"TE GPUs", TruncNormal{1, 1, 1, 8}, 8, 1, 1, 8},
		{"BE GPUs on a 4-GPU node", TruncNormal{4, 4, 1, 8}, 4, 1, 1, 4},
		{"CPUs, fractional node", TruncNormal{12, 12, 1, 32}, 31.5, 0, 1, 31},
		{"zero allowed", TruncNormal{0, 2, 0, 5}, 5, 0, 0, 5},
	}
	const n = 200_000
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := wholeSampler(c.d, c.capacity, c.min)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(i), 9))
			counts := map[float64]int{}
			for range n {
				x := w.Sample(r)
				if x != math.Trunc(x) || x < c.lo || x > c.hi {
					t.Fatalf("drew %g, want a whole number in [%g, %g]", x, c.lo, c.hi)
				}
				counts[x]++
			}
			// Each count's frequency is the normal's mass on [k-½, k+½)
			// within the interval, to five binomial standard errors.
			pdf := func(x float64) float64 { z := (x - c.d.Mean) / c.d.SD; return math.Exp(-z * z / 2) }
			z := integrate(pdf, c.lo-0.5, c.hi+0.5, 20000)
			mean := 0.0
			for k := c.lo; k <= c.hi; k++ {
				p := integrate(pdf, k-0.5, k+0.5, 2000) / z
				mean += k * p
				got := float64(counts[k]) / n
				if tol := 5 * math.Sqrt(p*(1-p)/n); math.Abs(got-p) > tol {
					t.Errorf("P(%g) = %.5f, want %.5f ± %.2g", k, got, p, tol)
				}
			}
			if got := w.Expected(); math.Abs(got-mean) > 1e-6 {
				t.Errorf("Expected() = %g, want %g", got, mean)
			}
		})
	}
}

func TestWholeSamplerInvalid(t *testing.T) {
	cases := []struct {
		d             TruncNormal
		capacity, min float64
		want          string
	}{
		{TruncNormal{1, 1, 0, 8}, 8, 1, "lo must be a whole number >= 1"},
		{TruncNormal{1, 1, 1.5, 8}, 8, 1, "lo must be a whole number"},
		{TruncNormal{1, 1, 1, 7.5}, 8, 1, "hi must be a whole number"},
		{TruncNormal{4, 1, 2, 8}, 1, 1, "a node holds only 1, below lo"},
		{TruncNormal{1.5, 0, 1, 8}, 8, 1, "mean must be a whole number"},
	}
	for _, c := range cases {
		_, err := wholeSampler(c.d, c.capacity, c.min)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v on %g: error %v, want one containing %q", c.d, c.capacity, err, c.want)
		}
	}
}
