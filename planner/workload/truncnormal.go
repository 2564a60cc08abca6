package workload

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"
)

// TruncNormal is a normal distribution N(Mean, SD²) truncated to [Lo, Hi]:
// a draw is a normal draw conditioned on falling in the interval. Mean and SD
// are the parameters of the untruncated normal (what the FitGpp paper calls
// "the mean of the fitted normal distribution"), not the moments of the
// truncated one; Sampler's Expected and StdDev give the latter. Lo may be
// -Inf and Hi +Inf. SD 0 is a constant Mean, which must then lie in
// [Lo, Hi].
type TruncNormal struct {
	Mean, SD float64
	Lo, Hi   float64
}

// String shows the distribution as N(mean, sd) on [lo, hi].
func (d TruncNormal) String() string {
	return fmt.Sprintf("N(%g, %g) on [%g, %g]", d.Mean, d.SD, d.Lo, d.Hi)
}

// Validate checks the parameters: finite Mean, finite non-negative SD,
// Lo < Hi (Lo <= Hi when SD is 0), and an interval that carries probability
// under the normal (one that lies 38 or more standard deviations out, where
// float64 has no mass left, is rejected).
func (d TruncNormal) Validate() error {
	_, err := d.Sampler()
	return err
}

// Sampler is a TruncNormal prepared for drawing: the normal CDF at both
// bounds is computed once.
type Sampler struct {
	mean, sd float64
	lo, hi   float64
	// flip: the interval lies right of the mean, so the standardised
	// interval is mirrored to the left tail, where the CDF is accurate.
	flip bool
	// a, b are the standardised bounds after mirroring, pa, pb the standard
	// normal CDF there.
	a, b, pa, pb float64
}

// Sampler validates d and prepares it for drawing.
func (d TruncNormal) Sampler() (Sampler, error) {
	switch {
	case math.IsNaN(d.Mean) || math.IsInf(d.Mean, 0):
		return Sampler{}, fmt.Errorf("%v: mean must be a finite number", d)
	case math.IsNaN(d.SD) || math.IsInf(d.SD, 0) || d.SD < 0:
		return Sampler{}, fmt.Errorf("%v: standard deviation must be a finite number >= 0", d)
	case math.IsNaN(d.Lo) || math.IsNaN(d.Hi) || math.IsInf(d.Lo, 1) || math.IsInf(d.Hi, -1):
		return Sampler{}, fmt.Errorf("%v: bounds must be numbers, lo not +Inf and hi not -Inf", d)
	}
	s := Sampler{mean: d.Mean, sd: d.SD, lo: d.Lo, hi: d.Hi}
	if d.SD == 0 {
		if d.Lo > d.Hi || d.Mean < d.Lo || d.Mean > d.Hi {
			return Sampler{}, fmt.Errorf("%v: with standard deviation 0 the mean must lie within [lo, hi]", d)
		}
		return s, nil
	}
	if d.Lo >= d.Hi {
		return Sampler{}, fmt.Errorf("%v: lo must be below hi", d)
	}
	s.a, s.b = (d.Lo-d.Mean)/d.SD, (d.Hi-d.Mean)/d.SD
	if s.a > 0 {
		s.flip = true
		s.a, s.b = -s.b, -s.a
	}
	s.pa, s.pb = stdNormalCDF(s.a), stdNormalCDF(s.b)
	if !(s.pb > s.pa) {
		return Sampler{}, fmt.Errorf("%v: the interval lies too far in the normal's tail to carry any probability", d)
	}
	return s, nil
}

// Sample draws one value by inverting the CDF; it uses exactly one 64-bit
// draw of r, so streams stay aligned whatever the parameters.
func (s Sampler) Sample(r *rand.Rand) float64 {
	u := openUnit(r)
	if s.sd == 0 {
		return s.mean
	}
	z := stdNormalQuantile(s.pa + (s.pb-s.pa)*u)
	z = min(max(z, s.a), s.b) // rounding near the bounds
	if s.flip {
		z = -z
	}
	return min(max(s.mean+s.sd*z, s.lo), s.hi)
}

// Expected is the mean of the truncated distribution:
// Mean + SD·(φ(α) − φ(β)) / (Φ(β) − Φ(α)) for the standardised bounds α, β.
func (s Sampler) Expected() float64 {
	if s.sd == 0 {
		return s.mean
	}
	m := (stdNormalPDF(s.a) - stdNormalPDF(s.b)) / (s.pb - s.pa)
	if s.flip {
		m = -m
	}
	return s.mean + s.sd*m
}

// StdDev is the standard deviation of the truncated distribution.
func (s Sampler) StdDev() float64 {
	if s.sd == 0 {
		return 0
	}
	z := s.pb - s.pa
	m := (stdNormalPDF(s.a) - stdNormalPDF(s.b)) / z
	v := 1 + (tailTerm(s.a)-tailTerm(s.b))/z - m*m
	return s.sd * math.Sqrt(max(v, 0))
}

// CDF is the truncated distribution's cumulative distribution function.
func (s Sampler) CDF(x float64) float64 {
	switch {
	case x < s.lo:
		return 0
	case x >= s.hi:
		return 1
	case s.sd == 0:
		if x < s.mean {
			return 0
		}
		return 1
	}
	z := (x - s.mean) / s.sd
	if s.flip {
		// P(X <= x) = P(-Z' <= z) = 1 - P(Z' < -z) on the mirrored interval.
		return 1 - (stdNormalCDF(-z)-s.pa)/(s.pb-s.pa)
	}
	return (stdNormalCDF(z) - s.pa) / (s.pb - s.pa)
}

// openUnit is a uniform draw in the open interval (0, 1).
func openUnit(r *rand.Rand) float64 {
	return (float64(r.Uint64()>>11) + 0.5) / (1 << 53)
}

// stdNormalCDF is Φ(z), accurate in the left tail (erfc).
func stdNormalCDF(z float64) float64 { return distuv.UnitNormal.CDF(z) }

// stdNormalQuantile is Φ⁻¹(p), accurate in both tails (Wichura's AS 241;
// math.Erfcinv is not: it computes Erfinv(1-x) and loses small x).
func stdNormalQuantile(p float64) float64 { return distuv.UnitNormal.Quantile(p) }

// stdNormalPDF is φ(z); 0 at ±Inf.
func stdNormalPDF(z float64) float64 { return distuv.UnitNormal.Prob(z) }

// tailTerm is z·φ(z), 0 at ±Inf (where the product would be NaN).
func tailTerm(z float64) float64 {
	if math.IsInf(z, 0) {
		return 0
	}
	return z * stdNormalPDF(z)
}
