package report

import (
	"math"
	"slices"

	"github.com/themis-nomad/themis/planner/sim"
)

// mean is the arithmetic mean of xs, undefined when xs is empty.
func mean(xs []float64) Num {
	if len(xs) == 0 {
		return undefined()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return Num(sum / float64(len(xs)))
}

// percentile is the nearest-rank p-th percentile (0 <= p <= 100) of sorted:
// sorted[ceil(p/100*n)-1], sorted[0] for p = 0; undefined when empty.
func percentile(sorted []float64, p float64) Num {
	n := len(sorted)
	if n == 0 {
		return undefined()
	}
	// p*n is exact for the integer p and n we use, so the division by 100
	// happens last to keep e.g. 95*20/100 = 19 exact.
	rank := int(math.Ceil(p * float64(n) / 100))
	rank = min(max(rank, 1), n)
	return Num(sorted[rank-1])
}

// sortedCopy returns xs sorted ascending, leaving xs alone.
func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// finishedJobs returns the JCTs and queueing delays of r's finished jobs, in
// trace order.
func finishedJobs(jobs []sim.JobResult) (jct, queue []float64) {
	for _, j := range jobs {
		if j.Finished {
			jct = append(jct, j.JCT())
			queue = append(queue, j.Queue)
		}
	}
	return jct, queue
}

// sortedUtil returns the samples ordered by time. The sort is stable: of
// samples with equal T, the last one given is the one in effect.
func sortedUtil(util []sim.UtilSample) []sim.UtilSample {
	s := slices.Clone(util)
	slices.SortStableFunc(s, func(a, b sim.UtilSample) int {
		switch {
		case a.T < b.T:
			return -1
		case a.T > b.T:
			return 1
		}
		return 0
	})
	return s
}

// busyGPUSeconds integrates the busy-GPU step function over [0, horizon]:
// sample i holds from its T until the next sample's T, the last one until
// horizon.
func busyGPUSeconds(util []sim.UtilSample, horizon float64) float64 {
	if !(horizon > 0) {
		return 0
	}
	s := sortedUtil(util)
	total := 0.0
	for i, u := range s {
		from := max(u.T, 0)
		to := horizon
		if i+1 < len(s) {
			to = min(s[i+1].T, horizon)
		}
		if to > from {
			total += float64(u.Busy) * (to - from)
		}
	}
	return total
}

// factor is the factor of improvement ref/policy (> 1: the policy is better
// than the reference); 0/0 is 1; undefined when either side is undefined or
// only the policy's value is 0.
func factor(ref, policy Num) Num {
	if !ref.Defined() || !policy.Defined() {
		return undefined()
	}
	if policy == 0 {
		if ref == 0 {
			return 1
		}
		return undefined()
	}
	return ref / policy
}

// slowdowns are the slowdowns of the finished jobs of a class.
func slowdowns(jobs []sim.JobResult, class string) []float64 {
	var out []float64
	for _, j := range jobs {
		if j.Finished && j.Class == class {
			out = append(out, j.Slowdown())
		}
	}
	return out
}
