package policies

import (
	"math"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// stretcher is a Gittins index that says how far it runs on smoothly from
// an attained service (gittins.Distribution.Stretch): up to there 1/G
// falls by exactly the service gained, so G only rises, or stays 0.
type stretcher interface {
	GittinsIndex
	Stretch(attained, delta float64) float64
}

// maxStretches bounds the stretches walked for one running job: past
// them its horizon is where the walk stopped (early, which is safe).
const maxStretches = 256

// gittinsUntil is 2D-Gittins's horizon, at most next (the queues'
// thresholds and promotions; zero: none). Inside a queue the jobs rank by
// index; a waiting job's stands, and a running job's moves with its
// service along ix's stretches: it rises inside one, as 1/G falls by the
// service gained, and may jump at the end. So the ranking of a running
// job against the waiting ones of its queue may change only where its
// rising index reaches a waiting one's, or its jump passes or lands on
// one; the first such time over the running jobs is the horizon. A tie
// with a waiting job is now when the index moves at all (the tie may
// break the other way). As for the other policies, running jobs passing
// each other change which of them would be preempted, never whether.
func (t *Tiresias) gittinsUntil(now time.Time, jobs []*core.Job, ix stretcher, next time.Time) time.Time {
	limit := math.Inf(1) // seconds from now
	if !next.IsZero() {
		limit = next.Sub(now).Seconds()
	}
	waiting := make([][]float64, len(t.Thresholds))
	for _, j := range jobs {
		if j.Phase != core.Queued {
			continue
		}
		if l := t.Level(j); l < len(t.Thresholds) {
			waiting[l] = append(waiting[l], ix.Index(j.AttainedSinceReset(), t.quantum(l)))
		}
	}
	for _, w := range waiting {
		slices.Sort(w)
	}
	for _, j := range jobs {
		if j.Phase != core.Granted || j.GPUs <= 0 {
			continue
		}
		l := t.Level(j)
		if l >= len(t.Thresholds) || len(waiting[l]) == 0 {
			continue // the last queue is FIFO; an empty one has no one to pass
		}
		rate := j.ServiceRate()
		if !(rate > 0) {
			continue
		}
		service := indexMeets(ix, j.AttainedSinceReset(), t.Thresholds[l], t.quantum(l), waiting[l], limit*rate)
		limit = min(limit, service/rate)
	}
	if math.IsInf(limit, 1) {
		return time.Time{}
	}
	return now.Add(time.Duration(max(limit, 0) * float64(time.Second)))
}

// indexMeets is the service a running job with attained service a can
// gain, at most up to limit, before its index at quantum delta meets one of
// the sorted waiting indices: reaches it while rising inside a stretch,
// or passes or lands on it where a stretch ends (top, the queue's
// threshold, ends the walk: crossing it is a change of its own). Rounding
// is met by erring early.
func indexMeets(ix stretcher, a, top, delta float64, waiting []float64, limit float64) float64 {
	start, g := a, ix.Index(a, delta)
	for range maxStretches {
		if a-start >= limit {
			return limit
		}
		// k: the least waiting index at or above g.
		k, tie := slices.BinarySearch(waiting, g)
		if tie && g > 0 {
			return a - start // it rises from the tie at once
		}
		end := min(ix.Stretch(a, delta), top)
		// slack: how far rounding may move 1/G and the service here.
		slack := 1e-9 * (math.Abs(a) + recip(g))
		if g > 0 && k < len(waiting) {
			// Reached where 1/G has fallen to its reciprocal.
			if reach := a + (1/g - 1/waiting[k]); reach < end+slack {
				return max(reach-slack-start, 0)
			}
		}
		if end >= top || math.IsInf(end, 1) {
			return math.Inf(1)
		}
		// The jump at end: from the index just before it to the one at it.
		// Rising, it may near infinity where a sample is reached (1/G
		// falls to 0: that job would have been sure to finish).
		before := g
		if g > 0 {
			before = math.Inf(1)
			if left := 1/g - (end - a); left > 0 {
				before = max(g, 1/left)
			}
		}
		after := ix.Index(end, delta)
		lo, hi := min(before, after), max(before, after)
		lo, hi = lo-1e-9*lo, hi+1e-9*hi
		if i, _ := slices.BinarySearch(waiting, lo); i < len(waiting) && waiting[i] <= hi {
			return max(end-slack-start, 0)
		}
		a, g = end, after
	}
	return a - start
}

// recip is 1/g, 0 for 0.
func recip(g float64) float64 {
	if g == 0 {
		return 0
	}
	return 1 / g
}
