package policies

import (
	"math"
	"slices"
	"sync"

	"github.com/themis-nomad/themis/planner/core"
)

// rankKeys are the precomputed sort keys of jobs being ranked: a job ranks
// by level, then key, then key2, then FIFO order. Ranking is the hottest
// code of a simulation (thousands of queued jobs, hundreds of thousands of
// rounds), so it is built for that:
//
//   - the jobs are first put in FIFO order, which is a no-op in the usual
//     case (callers keep jobs in arrival order), so that a job's index is
//     its FIFO rank and the final tie-break compares integers;
//   - small records of integer keys are sorted (floats mapped to integers of
//     the same order), not the jobs' pointers: comparisons inline and the
//     sort is free of the garbage collector's write barriers;
//   - the records are bucketed by level first (a counting sort: levels are a
//     few queue numbers); inside a level, the jobs without key2 (+Inf: never
//     started, for Tiresias) stay in FIFO order and the rest are nearly
//     sorted already, so an insertion sort that gives up when it meets too
//     many inversions does the work in about one pass, and the two parts
//     are merged;
//   - the buffers are pooled across rounds.
type rankKeys struct {
	jobs      []*core.Job
	level     []int
	key, key2 []float64
	recs, tmp []rankRec
	count     []int
	mixed     []levelKey
	sorted    []*core.Job
	// direct: the records were set one by one (newRankRecs, set), not
	// from the key arrays.
	direct bool
}

// rankRec is one job's keys, with its FIFO rank i. Levels beyond the range
// of int32 are clamped to it (levels are queue numbers).
type rankRec struct {
	k, k2 uint64
	l, i  int32
}

func (x rankRec) less(y rankRec) bool {
	if x.l != y.l {
		return x.l < y.l
	}
	if x.k != y.k {
		return x.k < y.k
	}
	if x.k2 != y.k2 {
		return x.k2 < y.k2
	}
	return x.i < y.i
}

func compareRec(x, y rankRec) int {
	switch {
	case x.less(y):
		return -1
	case y.less(x):
		return 1
	}
	return 0
}

var rankPool = sync.Pool{New: func() any { return new(rankKeys) }}

// newRankKeys puts jobs in FIFO order and returns zeroed keys for them,
// indexed like jobs. The caller fills the keys and calls sort.
func newRankKeys(jobs []*core.Job) *rankKeys {
	core.SortFIFO(jobs)
	r := rankPool.Get().(*rankKeys)
	n := len(jobs)
	r.jobs = jobs
	r.level = zeroed(r.level, n)
	r.key = zeroed(r.key, n)
	r.key2 = zeroed(r.key2, n)
	return r
}

// newRankRecs is newRankKeys for a caller that sets every job's keys
// with set (sparing the key arrays), then calls sort. It leaves jobs as
// they are: the caller checks their FIFO order (core.FIFOOrdered) as it sets
// the keys, and if they are not in it, puts them in it (SortFIFO) and
// sets the keys again.
func newRankRecs(jobs []*core.Job) *rankKeys {
	r := rankPool.Get().(*rankKeys)
	r.jobs = jobs
	r.recs = sized(r.recs, len(jobs))
	r.direct = true
	return r
}

// set gives job i (of newRankRecs) its level and keys.
func (r *rankKeys) set(i, level int, key, key2 float64) {
	r.recs[i] = rankRec{l: int32(min(max(level, math.MinInt32), math.MaxInt32)), k: orderBits(key), k2: orderBits(key2), i: int32(i)}
}

// sized returns s with length n, its contents undefined.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func zeroed[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// maxBucketLevel bounds the levels that are bucketed before sorting; other
// levels (negative or larger) are simply sorted.
const maxBucketLevel = 1024

// sort orders the jobs by level, then key, then key2, then FIFO order, and
// returns the buffers to the pool.
//
// The keys become records (unless set already); one pass counts them into two buckets per
// level: key2 finite, then key2 +Inf or NaN (never-started jobs, for
// Tiresias); a second places them, so that each bucket keeps FIFO order.
// Each bucket is sorted adaptively; where a level's key is not one value
// (2D-Gittins) its two buckets are merged.
func (r *rankKeys) sort() {
	n := len(r.jobs)
	inf := orderBits(math.Inf(1))
	if !r.direct {
		r.recs = sized(r.recs, n)
		for i, l := range r.level {
			r.recs[i] = rankRec{l: int32(min(max(l, math.MinInt32), math.MaxInt32)), k: orderBits(r.key[i]), k2: orderBits(r.key2[i]), i: int32(i)}
		}
	}
	r.direct = false
	r.tmp = sized(r.tmp, n)
	r.count = r.count[:0]
	r.mixed = r.mixed[:0]
	bucket := true
	for _, x := range r.recs {
		// A level beyond int32 was clamped to one beyond maxBucketLevel.
		l := int(x.l)
		if l < 0 || l > maxBucketLevel {
			bucket = false
			break
		}
		for len(r.count) <= 2*l+2 {
			r.count = append(r.count, 0)
		}
		for len(r.mixed) <= l {
			r.mixed = append(r.mixed, levelKey{})
		}
		if m := &r.mixed[l]; !m.seen {
			m.seen, m.k = true, x.k
		} else if m.k != x.k {
			m.mixed = true
		}
		b := 2 * l
		if x.k2 >= inf {
			b++
		}
		r.count[b+1]++
	}
	if bucket && n > 0 {
		for b := 1; b < len(r.count); b++ {
			r.count[b] += r.count[b-1]
		}
		starts := r.count[:len(r.count)-1]
		for _, x := range r.recs {
			b := 2 * int(x.l)
			if x.k2 >= inf {
				b++
			}
			r.tmp[starts[b]] = x
			starts[b]++
		}
		// starts[b] is now bucket b's end; bucket b begins at the end of b-1.
		begin := 0
		for l := range r.mixed {
			midA, end := starts[2*l], starts[2*l+1]
			a, bb := r.tmp[begin:midA], r.tmp[midA:end]
			adaptiveSort(a)
			adaptiveSort(bb)
			if r.mixed[l].mixed {
				r.merge(r.tmp[begin:end], len(a))
			}
			begin = end
		}
	} else {
		copy(r.tmp, r.recs)
		slices.SortFunc(r.tmp, compareRec)
	}
	r.sorted = r.sorted[:0]
	for _, x := range r.tmp {
		r.sorted = append(r.sorted, r.jobs[x.i])
	}
	copy(r.jobs, r.sorted)
	clear(r.sorted) // drop the pointers, so the pool keeps no job alive
	r.jobs = nil
	rankPool.Put(r)
}

// levelKey records whether a level's records share one key.
type levelKey struct {
	seen, mixed bool
	k           uint64
}

// merge merges the sorted halves seg[:mid] and seg[mid:] in place, through
// r.recs as scratch (the records are all in r.tmp by now).
func (r *rankKeys) merge(seg []rankRec, mid int) {
	out := r.recs[:0]
	i, k := 0, mid
	for i < mid && k < len(seg) {
		if seg[k].less(seg[i]) {
			out = append(out, seg[k])
			k++
		} else {
			out = append(out, seg[i])
			i++
		}
	}
	out = append(out, seg[i:mid]...)
	out = append(out, seg[k:]...)
	copy(seg, out)
}

// adaptiveSort sorts s in time linear in its length plus its inversions
// when it is nearly sorted: the jobs that started, taken in FIFO order,
// mostly started in that order too. A slice far from sorted falls back to
// pattern-defeating quicksort.
func adaptiveSort(s []rankRec) {
	budget := 4*len(s) + 64 // element moves allowed before giving up
	for i := 1; i < len(s); i++ {
		if !s[i].less(s[i-1]) {
			continue
		}
		v := s[i]
		k := i
		for k > 0 && v.less(s[k-1]) {
			s[k] = s[k-1]
			k--
			budget--
		}
		s[k] = v
		if budget < 0 {
			slices.SortFunc(s, compareRec)
			return
		}
	}
}

// orderBits maps a float64 to an integer such that the integers' order is
// the floats' order (-0 and +0 are made equal; NaNs sort last).
func orderBits(f float64) uint64 {
	if f == 0 {
		f = 0
	}
	if f != f {
		return math.MaxUint64
	}
	b := math.Float64bits(f)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// sortBy orders jobs by key (computed once per job), ties in FIFO order.
func sortBy(jobs []*core.Job, key func(*core.Job) float64) {
	r := newRankKeys(jobs)
	for i, j := range r.jobs {
		r.key[i] = key(j)
	}
	r.sort()
}
