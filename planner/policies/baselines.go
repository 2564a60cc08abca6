package policies

import (
	"math"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// The baselines of the Tiresias and Themis papers. Each is a ranking plus
// the two switches of the generic scheduler (preemptive, blocking).

// FIFO is YARN's capacity scheduler as the Tiresias paper uses it: jobs in
// submission order, consolidated placement, head-of-line blocking (nothing
// starts behind a job that does not fit), no preemption.
type FIFO struct{}

func (FIFO) Name() string                       { return "fifo" }
func (FIFO) Rank(_ time.Time, jobs []*core.Job) { core.SortFIFO(jobs) }
func (FIFO) Preemptive() bool                   { return false }
func (FIFO) Blocking() bool                     { return true }
func (FIFO) Consolidate(*core.Job) bool         { return true }
func (p FIFO) Capabilities() core.Capabilities  { return core.RankOnly(p) }

// SteadyUntil implements core.Steady: arrival order does not change with
// time, and the policy never preempts, so its decision stands until
// something changes.
func (FIFO) SteadyUntil(time.Time, []*core.Job) time.Time { return time.Time{} }

// FIFOSkip is FIFO with best-effort backfilling: a later job may start when
// the head of the queue does not fit.
type FIFOSkip struct{}

func (FIFOSkip) Name() string                       { return "fifo-skip" }
func (FIFOSkip) Rank(_ time.Time, jobs []*core.Job) { core.SortFIFO(jobs) }
func (FIFOSkip) Preemptive() bool                   { return false }
func (FIFOSkip) Blocking() bool                     { return false }
func (FIFOSkip) Consolidate(*core.Job) bool         { return true }
func (p FIFOSkip) Capabilities() core.Capabilities  { return core.RankOnly(p) }

// SteadyUntil implements core.Steady: arrival order does not change with
// time, and the policy never preempts, so its decision stands until
// something changes.
func (FIFOSkip) SteadyUntil(time.Time, []*core.Job) time.Time { return time.Time{} }

// SRTF is shortest remaining time first, with perfect knowledge of job
// durations (an oracle baseline), preemptive.
type SRTF struct{}

func (SRTF) Name() string { return "srtf" }
func (SRTF) Rank(_ time.Time, jobs []*core.Job) {
	sortBy(jobs, func(j *core.Job) float64 { return remaining(j) })
}
func (SRTF) Preemptive() bool                  { return true }
func (SRTF) Blocking() bool                    { return false }
func (SRTF) Consolidate(*core.Job) bool        { return true }
func (p SRTF) Capabilities() core.Capabilities { return core.RankOnly(p) }

// SteadyUntil implements core.Steady: when a running job's remaining time
// falls to a waiting job's (steadyRemaining).
func (SRTF) SteadyUntil(now time.Time, jobs []*core.Job) time.Time {
	return steadyRemaining(now, jobs, func(*core.Job) float64 { return 1 })
}

// SRSF is shortest remaining service first: remaining time x GPUs, with
// perfect knowledge, preemptive (Tiresias's 2D oracle baseline).
type SRSF struct{}

func (SRSF) Name() string { return "srsf" }
func (SRSF) Rank(_ time.Time, jobs []*core.Job) {
	sortBy(jobs, func(j *core.Job) float64 { return remaining(j) * float64(j.GPUs) })
}
func (SRSF) Preemptive() bool                  { return true }
func (SRSF) Blocking() bool                    { return false }
func (SRSF) Consolidate(*core.Job) bool        { return true }
func (p SRSF) Capabilities() core.Capabilities { return core.RankOnly(p) }

// SteadyUntil implements core.Steady: when a running job's remaining
// service falls to a waiting job's (steadyRemaining).
func (SRSF) SteadyUntil(now time.Time, jobs []*core.Job) time.Time {
	return steadyRemaining(now, jobs, func(j *core.Job) float64 { return float64(j.GPUs) })
}

// LAS is least attained service first in two dimensions (GPUs x time), with
// a continuous priority: preemptive, re-ranked at every decision (the Themis
// paper's "Tiresias" baseline).
type LAS struct{}

func (LAS) Name() string { return "las" }
func (LAS) Rank(_ time.Time, jobs []*core.Job) {
	sortBy(jobs, func(j *core.Job) float64 { return j.Attained })
}
func (LAS) Preemptive() bool                  { return true }
func (LAS) Blocking() bool                    { return false }
func (LAS) Consolidate(*core.Job) bool        { return true }
func (p LAS) Capabilities() core.Capabilities { return core.RankOnly(p) }

// SteadyUntil implements core.Steady: only running jobs gain service, so
// the ranking changes when one of them passes a waiting job's attained
// service: for each running job, the first waiting job's service above its
// own, reached at its service rate (core.Job.ServiceRate). A running job may
// run below that rate
// (not started yet), which only makes the time early. Running jobs passing
// each other change which of them would be preempted, never whether.
func (LAS) SteadyUntil(now time.Time, jobs []*core.Job) time.Time {
	var waiting []float64
	var running []moving
	for _, j := range jobs {
		switch {
		case j.Phase == core.Queued:
			waiting = append(waiting, j.Attained)
		case j.Phase == core.Granted && j.GPUs > 0:
			running = append(running, moving{key: j.Attained, rate: j.ServiceRate()})
		}
	}
	return crossing(now, waiting, running, true)
}

// Gandiva packs greedily by placement preference: jobs in arrival order, each
// started only where it can be consolidated, without head-of-line blocking or
// preemption (Gandiva's time-slicing and migration are not modelled).
type Gandiva struct{}

func (Gandiva) Name() string                       { return "gandiva" }
func (Gandiva) Rank(_ time.Time, jobs []*core.Job) { core.SortFIFO(jobs) }
func (Gandiva) Preemptive() bool                   { return false }
func (Gandiva) Blocking() bool                     { return false }
func (Gandiva) Consolidate(*core.Job) bool         { return true }
func (p Gandiva) Capabilities() core.Capabilities  { return core.RankOnly(p) }

// SteadyUntil implements core.Steady: arrival order does not change with
// time, and the policy never preempts, so its decision stands until
// something changes.
func (Gandiva) SteadyUntil(time.Time, []*core.Job) time.Time { return time.Time{} }

// Optimus is the Themis paper's "Optimus" baseline: resources go first to
// the jobs whose throughput scales best with them. Optimus (Peng et al.,
// EuroSys'18) gives each GPU to the job with the largest marginal gain, the
// reduction of its remaining time per GPU. Jobs here are gangs that are not
// resized, so the gain of running a job is modelled as the share of its
// remaining work it does per GPU-second at a spread placement:
//
//	gain = 1 / (Skew x remaining time x GPUs)
//
// (Skew, the job's slowdown across machines, is its loss of scaling; 1 when
// unknown). Highest gain first, i.e. least remaining service inflated by
// the slowdown; preemptive and re-ranked at every decision (Optimus
// re-allocates periodically), placed anywhere (it maximises throughput,
// not locality). Unknown remaining times sort last.
type Optimus struct{}

func (Optimus) Name() string { return "optimus" }
func (Optimus) Rank(_ time.Time, jobs []*core.Job) {
	sortBy(jobs, func(j *core.Job) float64 { return remaining(j) * float64(j.GPUs) * max(1, j.Skew) })
}
func (Optimus) Preemptive() bool                  { return true }
func (Optimus) Blocking() bool                    { return false }
func (Optimus) Consolidate(*core.Job) bool        { return false }
func (p Optimus) Capabilities() core.Capabilities { return core.RankOnly(p) }

// SteadyUntil implements core.Steady: when a running job's inflated
// remaining service falls to a waiting job's (steadyRemaining).
func (Optimus) SteadyUntil(now time.Time, jobs []*core.Job) time.Time {
	return steadyRemaining(now, jobs, func(j *core.Job) float64 { return float64(j.GPUs) * max(1, j.Skew) })
}

// steadyRemaining is the horizon of a policy that ranks by remaining time
// times a weight that does not change (SRTF: 1, SRSF: GPUs, Optimus: GPUs
// times skew). Only a running job's remaining time falls, by at most a
// second a second (the live planner counts it down from the job's last
// progress report, divided by its placement's slowdown, which is at least
// 1; never below 0), and a waiting job's stands; an unknown one (-1) sorts
// last and stays so until a report, which is a change. So the ranking
// changes with time alone when a running job's key falls to a waiting
// job's at or below it: for each running job, the nearest waiting key at
// or below its own, reached at the weight per second (a tie may break the
// other way once it falls any: that is now). Running jobs passing each
// other change which of them would be preempted, never whether.
func steadyRemaining(now time.Time, jobs []*core.Job, weight func(*core.Job) float64) time.Time {
	var waiting []float64
	var running []moving
	for _, j := range jobs {
		w := weight(j)
		switch {
		case j.Phase == core.Queued && j.Remaining >= 0:
			waiting = append(waiting, j.Remaining*w)
		case j.Phase == core.Granted && j.Remaining > 0 && w > 0:
			running = append(running, moving{key: j.Remaining * w, rate: w})
		}
	}
	return crossing(now, waiting, running, false)
}

// moving is a running job's key in a policy's ranking and how fast it
// moves with time alone, at most (a second of clock moves it rate).
type moving struct{ key, rate float64 }

// crossing is the horizon of a ranking in which only running jobs' keys
// move with time, up (rising) or down, and waiting jobs' keys stand: the
// soonest time a running job's key reaches a waiting job's key on its way
// (the first at or above it when rising, the last at or below it
// otherwise; now when one is equal, as a tie may break the other way once
// it moves any); zero when none can.
func crossing(now time.Time, waiting []float64, running []moving, rising bool) time.Time {
	slices.Sort(waiting)
	soonest := math.Inf(1)
	for _, r := range running {
		i, found := slices.BinarySearch(waiting, r.key)
		switch {
		case found:
			soonest = 0
		case rising && i < len(waiting):
			soonest = min(soonest, (waiting[i]-r.key)/r.rate)
		case !rising && i > 0:
			soonest = min(soonest, (r.key-waiting[i-1])/r.rate)
		}
	}
	if math.IsInf(soonest, 1) {
		return time.Time{}
	}
	return now.Add(time.Duration(soonest * float64(time.Second)))
}

// remaining is a job's known remaining time; unknown sorts last.
func remaining(j *core.Job) float64 {
	if j.Remaining < 0 {
		return math.Inf(1)
	}
	return j.Remaining
}
