package gittins

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// maxTotal bounds the sum of all samples so that every intermediate sum stays
// finite; GPU-seconds of real jobs are nowhere near it.
const maxTotal = 1e300

// Distribution is an empirical job-size distribution (GPU-seconds). It is
// immutable once built and safe for concurrent use.
type Distribution struct {
	n int
	// size holds the distinct sample sizes, ascending.
	size []float64
	// cum[l] is the number of samples <= size[l].
	cum []int
	// below[l] is sum over samples of min(S, size[l]), that is
	// n·E[min(S, size[l])], kept as a double-double (hi + lo) so that
	// differences of two entries do not cancel.
	belowHi, belowLo []float64
}

// New builds a distribution from job sizes (attained service at completion,
// GPU-seconds). Sizes must be finite and non-negative; the slice is not
// retained.
func New(samples []float64) (*Distribution, error) {
	if len(samples) == 0 {
		return nil, fmt.Errorf("gittins: no samples")
	}
	for i, s := range samples {
		if err := checkSize(s); err != nil {
			return nil, fmt.Errorf("gittins: sample %d: %w", i, err)
		}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	var total float64
	for _, s := range sorted {
		total += s
	}
	if total > maxTotal {
		return nil, fmt.Errorf("gittins: samples sum to %g, past %g", total, maxTotal)
	}
	return build(sorted), nil
}

func checkSize(s float64) error {
	switch {
	case math.IsNaN(s):
		return fmt.Errorf("size is NaN")
	case math.IsInf(s, 0):
		return fmt.Errorf("size %v is not finite", s)
	case s < 0:
		return fmt.Errorf("size %v is negative", s)
	}
	return nil
}

// build makes a distribution from valid sizes sorted ascending whose sum is
// at most about maxTotal; it may be empty (Online before any observation).
func build(sorted []float64) *Distribution {
	d := &Distribution{n: len(sorted)}
	d.size = make([]float64, 0, len(sorted))
	d.cum = make([]int, 0, len(sorted))
	for i, s := range sorted {
		if k := len(d.size); k > 0 && d.size[k-1] == s {
			d.cum[k-1]++
			continue
		}
		d.size = append(d.size, s)
		d.cum = append(d.cum, i+1)
	}
	k := len(d.size)
	d.belowHi = make([]float64, k)
	d.belowLo = make([]float64, k)
	var hi, lo, prev float64
	prevCum := 0
	for l, s := range d.size {
		// Between size[l-1] and size[l], n - cum[l-1] samples are still
		// running: n∫(1-F) over that gap.
		hi, lo = ddAdd(hi, lo, (s-prev)*float64(d.n-prevCum))
		d.belowHi[l], d.belowLo[l] = hi, lo
		prev, prevCum = s, d.cum[l]
	}
	return d
}

// Len is the number of samples.
func (d *Distribution) Len() int { return d.n }

// Max is the largest sample; past it the index is 0. It is 0 for an empty
// distribution.
func (d *Distribution) Max() float64 {
	if len(d.size) == 0 {
		return 0
	}
	return d.size[len(d.size)-1]
}

// Index is the Gittins index G(a, Δ) for attained service a and service
// quantum Δ:
//
//	P(S - a <= Δ | S > a) / E[min(S - a, Δ) | S > a]
//
// It is 0 when no sample exceeds a (docs/tiresias.md, "A job that outlived
// every sample"), when Δ <= 0 and when an argument is NaN; a < 0 counts
// as 0. Δ = +Inf gives 1/E[S - a | S > a]. O(log k) for k distinct sizes.
func (d *Distribution) Index(attained, delta float64) float64 {
	a, ok := d.clampAttained(attained)
	if !ok || !(delta > 0) {
		return 0
	}
	i := d.firstAbove(a)
	if i == len(d.size) {
		return 0
	}
	// j: the last support point with s - a <= Δ (computed the way a direct
	// sum over samples would, so the two agree at the boundary).
	j := i + sort.Search(len(d.size)-i, func(x int) bool { return d.size[i+x]-a > delta }) - 1
	if j < i {
		return 0 // P = 0: nothing finishes within Δ.
	}
	den := d.served(a, i, j)
	if rest := d.n - d.cum[j]; rest > 0 {
		den += (delta - (d.size[j] - a)) * float64(rest)
	}
	return ratio(d.cum[j]-d.countAtMost(i), den)
}

// BestIndex is sup over Δ > 0 of Index(attained, Δ), the index of the paper's
// Pseudocode 1. The supremum is attained at Δ = s - a for a support point s >
// a; BestIndex scans those, O(log k + m) for m distinct sizes above a. Same
// conventions as Index for a past every sample and NaN.
func (d *Distribution) BestIndex(attained float64) float64 {
	a, ok := d.clampAttained(attained)
	if !ok {
		return 0
	}
	i := d.firstAbove(a)
	if i == len(d.size) {
		return 0
	}
	done := d.countAtMost(i)
	head := (d.size[i] - a) * float64(d.n-done)
	// Track the best count/den as a fraction and compare by cross
	// multiplication: no division in the loop.
	bestCount, bestDen := 0.0, 1.0
	for j := i; j < len(d.size); j++ {
		// served(a, i, j) inlined: the head term does not depend on j.
		h, l := ddSub(d.belowHi[j], d.belowLo[j], d.belowHi[i], d.belowLo[i])
		count, den := float64(d.cum[j]-done), head+(h+l)
		if count*bestDen > bestCount*den {
			bestCount, bestDen = count, den
		}
	}
	return ratio(int(bestCount), bestDen)
}

// Stretch is how far the index at quantum delta runs on smoothly from
// attained: the least attained service past it at which Index(·, delta)
// may jump. Up to there (exclusive) the same samples lie above a and the
// same finish within Δ of it, so
//
//	1/G(b, Δ) = 1/G(a, Δ) - (b - a)
//
// (the expected service in the quantum falls by exactly what is served,
// times the samples that finish within it: the count): the index rises,
// or stays 0 when no sample finishes within Δ. At the end it jumps: down
// where a sample size is passed (that job would have finished), up where
// a + Δ reaches one. +Inf when no sample lies above a (the index is 0 for
// good), and for NaN or Δ <= 0, where it is always 0. O(log k).
func (d *Distribution) Stretch(attained, delta float64) float64 {
	a, ok := d.clampAttained(attained)
	if !ok || !(delta > 0) {
		return math.Inf(1)
	}
	if attained < 0 {
		return 0 // counts as 0 until it reaches 0: treat the rise as a jump
	}
	i := d.firstAbove(a)
	if i == len(d.size) {
		return math.Inf(1)
	}
	// The first size past a + Δ, as Index finds j+1.
	next := i + sort.Search(len(d.size)-i, func(x int) bool { return d.size[i+x]-a > delta })
	end := d.size[i]
	if next < len(d.size) {
		end = min(end, reaches(d.size[next], delta))
	}
	return end
}

// reaches is the least float b at which s - b <= Δ as Index computes it
// (in floating point, where s - Δ itself may round either way): b - a
// rounds monotonically, so a few steps from s - Δ find it.
func reaches(s, delta float64) float64 {
	b := s - delta
	for s-b > delta {
		b = math.Nextafter(b, math.Inf(1))
	}
	for {
		prev := math.Nextafter(b, math.Inf(-1))
		if s-prev > delta {
			return b
		}
		b = prev
	}
}

// clampAttained maps attained service to a usable a: NaN is rejected, negative
// values count as 0.
func (d *Distribution) clampAttained(a float64) (float64, bool) {
	if math.IsNaN(a) {
		return 0, false
	}
	return max(a, 0), true
}

// firstAbove is the index of the smallest distinct size > a (len if none).
func (d *Distribution) firstAbove(a float64) int {
	return sort.Search(len(d.size), func(l int) bool { return d.size[l] > a })
}

// countAtMost is the number of samples below size[i].
func (d *Distribution) countAtMost(i int) int {
	if i == 0 {
		return 0
	}
	return d.cum[i-1]
}

// served is n·E[min(S - a, s_j - a); S > a] = n∫_a^{s_j} (1 - F), for
// size[i-1] <= a < size[i] and j >= i: the gap up to size[i] with every
// sample above a still running, then the precomputed gaps from size[i] to
// size[j]. All terms are non-negative, so nothing cancels.
func (d *Distribution) served(a float64, i, j int) float64 {
	h, l := ddSub(d.belowHi[j], d.belowLo[j], d.belowHi[i], d.belowLo[i])
	return (d.size[i]-a)*float64(d.n-d.countAtMost(i)) + (h + l)
}

// ratio is count/den with the conventions of the package: a zero count is 0,
// and an infinite denominator (sizes near the float limit) is 0, never NaN.
func ratio(count int, den float64) float64 {
	if count == 0 || math.IsInf(den, 1) {
		return 0
	}
	return float64(count) / den
}

// QuantumFor is the service quantum Δ_i that Discretized 2DAS assigns to a job
// with the given attained service: the upper threshold Q_i^hi of its queue,
// or +Inf in the last queue. thresholds are Q_1^hi < ... < Q_{K-1}^hi
// (GPU-seconds); a job is in queue i while attained < Q_i^hi.
func QuantumFor(attained float64, thresholds []float64) float64 {
	for _, hi := range thresholds {
		if attained < hi {
			return hi
		}
	}
	return math.Inf(1)
}

// ddAdd adds x to the double-double hi+lo (Knuth's TwoSum).
func ddAdd(hi, lo, x float64) (float64, float64) {
	s := hi + x
	bb := s - hi
	err := (hi - (s - bb)) + (x - bb)
	lo += err
	s2 := s + lo
	return s2, lo - (s2 - s)
}

// ddSub is (ah+al) - (bh+bl) as a double-double.
func ddSub(ah, al, bh, bl float64) (float64, float64) {
	s := ah - bh
	bb := s - ah
	err := (ah - (s - bb)) + (-bh - bb)
	err += al - bl
	s2 := s + err
	return s2, err - (s2 - s)
}
