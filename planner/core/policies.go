package core

import (
	"cmp"
	"fmt"
	"math"
	"slices"
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

// FIFOSkip is FIFO with best-effort backfilling: a later job may start when
// the head of the queue does not fit.
type FIFOSkip struct{}

func (FIFOSkip) Name() string                  { return "fifo-skip" }
func (FIFOSkip) Rank(_ time.Time, jobs []*Job) { SortFIFO(jobs) }
func (FIFOSkip) Preemptive() bool              { return false }
func (FIFOSkip) Blocking() bool                { return false }
func (FIFOSkip) Consolidate(*Job) bool         { return true }

// SRTF is shortest remaining time first, with perfect knowledge of job
// durations (an oracle baseline), preemptive.
type SRTF struct{}

func (SRTF) Name() string { return "srtf" }
func (SRTF) Rank(_ time.Time, jobs []*Job) {
	sortBy(jobs, func(j *Job) float64 { return remaining(j) })
}
func (SRTF) Preemptive() bool      { return true }
func (SRTF) Blocking() bool        { return false }
func (SRTF) Consolidate(*Job) bool { return true }

// SRSF is shortest remaining service first: remaining time x GPUs, with
// perfect knowledge, preemptive (Tiresias's 2D oracle baseline).
type SRSF struct{}

func (SRSF) Name() string { return "srsf" }
func (SRSF) Rank(_ time.Time, jobs []*Job) {
	sortBy(jobs, func(j *Job) float64 { return remaining(j) * float64(j.GPUs) })
}
func (SRSF) Preemptive() bool      { return true }
func (SRSF) Blocking() bool        { return false }
func (SRSF) Consolidate(*Job) bool { return true }

// LAS is least attained service first in two dimensions (GPUs x time), with
// a continuous priority: preemptive, re-ranked at every decision (the Themis
// paper's "Tiresias" baseline).
type LAS struct{}

func (LAS) Name() string { return "las" }
func (LAS) Rank(_ time.Time, jobs []*Job) {
	sortBy(jobs, func(j *Job) float64 { return j.Attained })
}
func (LAS) Preemptive() bool      { return true }
func (LAS) Blocking() bool        { return false }
func (LAS) Consolidate(*Job) bool { return true }

// Gandiva packs greedily by placement preference: jobs in arrival order, each
// started only where it can be consolidated, without head-of-line blocking or
// preemption (Gandiva's time-slicing and migration are not modelled).
type Gandiva struct{}

func (Gandiva) Name() string                  { return "gandiva" }
func (Gandiva) Rank(_ time.Time, jobs []*Job) { SortFIFO(jobs) }
func (Gandiva) Preemptive() bool              { return false }
func (Gandiva) Blocking() bool                { return false }
func (Gandiva) Consolidate(*Job) bool         { return true }

// remaining is a job's known remaining time; unknown sorts last.
func remaining(j *Job) float64 {
	if j.Remaining < 0 {
		return math.Inf(1)
	}
	return j.Remaining
}

// rankKeys are the precomputed sort keys of jobs being ranked. Sorting a
// permutation of plain integers, rather than the jobs' pointers, keeps the
// sort free of the garbage collector's write barriers: it matters when the
// simulator ranks thousands of queued jobs every round.
type rankKeys struct {
	jobs      []*Job
	level     []int
	key, key2 []float64
}

func newRankKeys(jobs []*Job) *rankKeys {
	return &rankKeys{jobs: jobs, level: make([]int, len(jobs)), key: make([]float64, len(jobs)), key2: make([]float64, len(jobs))}
}

// sort orders the jobs by level, then key, then key2, then less (FIFO by
// default).
func (r *rankKeys) sort(less func(a, b *Job) bool) {
	perm := make([]int32, len(r.jobs))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortStableFunc(perm, func(a, b int32) int {
		if r.level[a] != r.level[b] {
			return cmp.Compare(r.level[a], r.level[b])
		}
		if r.key[a] != r.key[b] {
			return cmp.Compare(r.key[a], r.key[b])
		}
		if r.key2[a] != r.key2[b] {
			return cmp.Compare(r.key2[a], r.key2[b])
		}
		if less(r.jobs[a], r.jobs[b]) {
			return -1
		}
		if less(r.jobs[b], r.jobs[a]) {
			return 1
		}
		return 0
	})
	sorted := make([]*Job, len(perm))
	for i, p := range perm {
		sorted[i] = r.jobs[p]
	}
	copy(r.jobs, sorted)
}

// sortBy orders jobs by key (computed once per job), ties in FIFO order.
func sortBy(jobs []*Job, key func(*Job) float64) {
	r := newRankKeys(jobs)
	for i, j := range jobs {
		r.key[i] = key(j)
	}
	r.sort(fifoLess)
}

// SortFIFO orders jobs by submission time, then sequence, then key.
func SortFIFO(jobs []*Job) {
	if slices.IsSortedFunc(jobs, func(a, b *Job) int { return fifoCompare(a, b) }) {
		return // the usual case: callers keep jobs in arrival order
	}
	newRankKeys(jobs).sort(fifoLess)
}

func fifoCompare(a, b *Job) int {
	switch {
	case fifoLess(a, b):
		return -1
	case fifoLess(b, a):
		return 1
	}
	return 0
}

func fifoLess(ja, jb *Job) bool {
	if !ja.Submitted.Equal(jb.Submitted) {
		return ja.Submitted.Before(jb.Submitted)
	}
	if ja.Seq != jb.Seq {
		return ja.Seq < jb.Seq
	}
	if ja.Key.Namespace != jb.Key.Namespace {
		return ja.Key.Namespace < jb.Key.Namespace
	}
	return ja.Key.ID < jb.Key.ID
}

// Names lists the policies NewPolicy knows.
func Names() []string {
	return []string{"fifo", "fifo-skip", "srtf", "srsf", "las", "gandiva", "tiresias-las", "tiresias-gittins"}
}

// NewPolicy returns a policy by name, configured by knobs ("tiresias.queues"
// = "3200s", ...). Unknown names and knobs are errors naming them.
func NewPolicy(name string, knobs Knobs) (Policy, error) {
	var p Policy
	var own []string
	switch name {
	case "fifo":
		p = FIFO{}
	case "fifo-skip":
		p = FIFOSkip{}
	case "srtf":
		p = SRTF{}
	case "srsf":
		p = SRSF{}
	case "las":
		p = LAS{}
	case "gandiva":
		p = Gandiva{}
	case "tiresias-las", "tiresias-gittins":
		t, err := NewTiresias(name == "tiresias-gittins", knobs)
		if err != nil {
			return nil, err
		}
		p, own = t, []string{"tiresias"}
	default:
		return nil, fmt.Errorf("policy %q: unknown (known: %v)", name, Names())
	}
	if err := knobs.Unused(own...); err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	return p, nil
}
