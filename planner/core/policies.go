package core

import (
	"cmp"
	"math"
	"time"
)

// The baselines of the Tiresias and Themis papers. Each is a ranking plus
// the two switches of the generic scheduler (preemptive, blocking).

// FIFO is YARN's capacity scheduler as the Tiresias paper uses it: jobs in
// submission order, consolidated placement, head-of-line blocking (nothing
// starts behind a job that does not fit), no preemption.
type FIFO struct{}

func (FIFO) Name() string                  { return "fifo" }
func (FIFO) Rank(_ time.Time, jobs []*Job) { SortFIFO(jobs) }
func (FIFO) Preemptive() bool              { return false }
func (FIFO) Blocking() bool                { return true }
func (FIFO) Consolidate(*Job) bool         { return true }
func (p FIFO) Capabilities() Capabilities  { return RankOnly(p) }

// FIFOSkip is FIFO with best-effort backfilling: a later job may start when
// the head of the queue does not fit.
type FIFOSkip struct{}

func (FIFOSkip) Name() string                  { return "fifo-skip" }
func (FIFOSkip) Rank(_ time.Time, jobs []*Job) { SortFIFO(jobs) }
func (FIFOSkip) Preemptive() bool              { return false }
func (FIFOSkip) Blocking() bool                { return false }
func (FIFOSkip) Consolidate(*Job) bool         { return true }
func (p FIFOSkip) Capabilities() Capabilities  { return RankOnly(p) }

// SRTF is shortest remaining time first, with perfect knowledge of job
// durations (an oracle baseline), preemptive.
type SRTF struct{}

func (SRTF) Name() string { return "srtf" }
func (SRTF) Rank(_ time.Time, jobs []*Job) {
	sortBy(jobs, func(j *Job) float64 { return remaining(j) })
}
func (SRTF) Preemptive() bool             { return true }
func (SRTF) Blocking() bool               { return false }
func (SRTF) Consolidate(*Job) bool        { return true }
func (p SRTF) Capabilities() Capabilities { return RankOnly(p) }

// SRSF is shortest remaining service first: remaining time x GPUs, with
// perfect knowledge, preemptive (Tiresias's 2D oracle baseline).
type SRSF struct{}

func (SRSF) Name() string { return "srsf" }
func (SRSF) Rank(_ time.Time, jobs []*Job) {
	sortBy(jobs, func(j *Job) float64 { return remaining(j) * float64(j.GPUs) })
}
func (SRSF) Preemptive() bool             { return true }
func (SRSF) Blocking() bool               { return false }
func (SRSF) Consolidate(*Job) bool        { return true }
func (p SRSF) Capabilities() Capabilities { return RankOnly(p) }

// LAS is least attained service first in two dimensions (GPUs x time), with
// a continuous priority: preemptive, re-ranked at every decision (the Themis
// paper's "Tiresias" baseline).
type LAS struct{}

func (LAS) Name() string { return "las" }
func (LAS) Rank(_ time.Time, jobs []*Job) {
	sortBy(jobs, func(j *Job) float64 { return j.Attained })
}
func (LAS) Preemptive() bool             { return true }
func (LAS) Blocking() bool               { return false }
func (LAS) Consolidate(*Job) bool        { return true }
func (p LAS) Capabilities() Capabilities { return RankOnly(p) }

// Gandiva packs greedily by placement preference: jobs in arrival order, each
// started only where it can be consolidated, without head-of-line blocking or
// preemption (Gandiva's time-slicing and migration are not modelled).
type Gandiva struct{}

func (Gandiva) Name() string                  { return "gandiva" }
func (Gandiva) Rank(_ time.Time, jobs []*Job) { SortFIFO(jobs) }
func (Gandiva) Preemptive() bool              { return false }
func (Gandiva) Blocking() bool                { return false }
func (Gandiva) Consolidate(*Job) bool         { return true }
func (p Gandiva) Capabilities() Capabilities  { return RankOnly(p) }

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
func (Optimus) Rank(_ time.Time, jobs []*Job) {
	sortBy(jobs, func(j *Job) float64 { return remaining(j) * float64(j.GPUs) * max(1, j.Skew) })
}
func (Optimus) Preemptive() bool             { return true }
func (Optimus) Blocking() bool               { return false }
func (Optimus) Consolidate(*Job) bool        { return false }
func (p Optimus) Capabilities() Capabilities { return RankOnly(p) }

// remaining is a job's known remaining time; unknown sorts last.
func remaining(j *Job) float64 {
	if j.Remaining < 0 {
		return math.Inf(1)
	}
	return j.Remaining
}

func fifoCompare(a, b *Job) int {
	if c := a.Submitted.Compare(b.Submitted); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Key.Namespace, b.Key.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Key.ID, b.Key.ID)
}
