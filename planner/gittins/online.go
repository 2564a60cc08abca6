package gittins

import (
	"fmt"
	"slices"
)

// Online is a job-size distribution learned from finished jobs: it starts
// from an optional prior (for example a trace such as yarn-gput10000) and
// adds the size of every job that completes.
//
// Observe only buffers the size, O(1). The next Index, BestIndex or
// Distribution call merges the buffer into a new immutable Distribution:
// O(n + p log p) for n known and p buffered sizes. A scheduler that observes
// completions between rounds therefore pays for one rebuild per round, and a
// Distribution a round took stays valid while later jobs finish.
//
// Online is not safe for concurrent use; the planner's rounds are serialized.
type Online struct {
	dist    *Distribution
	sorted  []float64 // every sample in dist, ascending
	pending []float64
	total   float64 // sum of sorted and pending
	// observed is every size Observe recorded, in order (the prior not
	// included): what a planner records to learn the same after a restart.
	observed []float64
}

// NewOnline starts from prior, which may be nil: then the distribution is
// empty until the first Observe and every index is 0, and the caller should
// fall back to 2D-LAS, as Tiresias does without a distribution.
func NewOnline(prior *Distribution) *Online {
	if prior == nil {
		return &Online{dist: build(nil)}
	}
	o := &Online{dist: prior, sorted: make([]float64, 0, prior.n)}
	for l, s := range prior.size {
		for range prior.cum[l] - prior.countAtMost(l) {
			o.sorted = append(o.sorted, s)
			o.total += s
		}
	}
	return o
}

// Observe records the size (GPU-seconds) of a finished job. It fails, and
// records nothing, for a NaN, infinite or negative size, or one that would
// take the sum of all sizes past 1e300.
func (o *Online) Observe(size float64) error {
	if err := checkSize(size); err != nil {
		return fmt.Errorf("gittins: observe: %w", err)
	}
	if o.total+size > maxTotal {
		return fmt.Errorf("gittins: observe %g: sizes would sum past %g", size, maxTotal)
	}
	o.total += size
	o.pending = append(o.pending, size)
	o.observed = append(o.observed, size)
	return nil
}

// Observed lists the sizes Observe recorded, in order, without the prior.
func (o *Online) Observed() []float64 { return slices.Clone(o.observed) }

// Distribution returns the distribution including every observation so far.
// The result is immutable; later observations do not change it.
func (o *Online) Distribution() *Distribution {
	if len(o.pending) == 0 {
		return o.dist
	}
	slices.Sort(o.pending)
	merged := make([]float64, 0, len(o.sorted)+len(o.pending))
	a, b := o.sorted, o.pending
	for len(a) > 0 && len(b) > 0 {
		if a[0] <= b[0] {
			merged, a = append(merged, a[0]), a[1:]
		} else {
			merged, b = append(merged, b[0]), b[1:]
		}
	}
	merged = append(append(merged, a...), b...)
	o.dist, o.sorted, o.pending = build(merged), merged, o.pending[:0]
	return o.dist
}

// Len is the number of samples, observations included.
func (o *Online) Len() int { return o.dist.n + len(o.pending) }

// Index is Distribution().Index(attained, delta).
func (o *Online) Index(attained, delta float64) float64 {
	return o.Distribution().Index(attained, delta)
}

// BestIndex is Distribution().BestIndex(attained).
func (o *Online) BestIndex(attained float64) float64 {
	return o.Distribution().BestIndex(attained)
}

// Stretch is Distribution().Stretch(attained, delta).
func (o *Online) Stretch(attained, delta float64) float64 {
	return o.Distribution().Stretch(attained, delta)
}
