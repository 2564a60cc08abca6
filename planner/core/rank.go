package core

import (
	"math"
	"slices"
	"sync"
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
	jobs      []*Job
	level     []int
	key, key2 []float64
	recs, tmp []rankRec
	count     []int
	sorted    []*Job
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
func newRankKeys(jobs []*Job) *rankKeys {
	SortFIFO(jobs)
	r := rankPool.Get().(*rankKeys)
	n := len(jobs)
	r.jobs = jobs
	r.level = zeroed(r.level, n)
	r.key = zeroed(r.key, n)
	r.key2 = zeroed(r.key2, n)
	return r
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
func (r *rankKeys) sort() {
	n := len(r.jobs)
	lo, hi := 0, 0
	for i, l := range r.level {
		if i == 0 || l < lo {
			lo = l
		}
		if i == 0 || l > hi {
			hi = l
		}
	}
	bucket := n > 0 && lo >= 0 && hi <= maxBucketLevel
	r.recs, r.tmp = sized(r.recs, n), sized(r.tmp, n)
	for i, l := range r.level { // staged in tmp, then bucketed into recs
		r.tmp[i] = rankRec{l: int32(min(max(l, math.MinInt32), math.MaxInt32)), k: orderBits(r.key[i]), k2: orderBits(r.key2[i]), i: int32(i)}
	}
	if bucket {
		r.count = zeroed(r.count, hi+2)
		for _, l := range r.level {
			r.count[l+1]++
		}
		for l := 1; l < len(r.count); l++ {
			r.count[l] += r.count[l-1]
		}
		for _, x := range r.tmp {
			r.recs[r.count[x.l]] = x
			r.count[x.l]++
		}
		start := 0
		for _, end := range r.count[:hi+1] {
			r.sortLevel(r.recs[start:end])
			start = end
		}
	} else {
		copy(r.recs, r.tmp)
		slices.SortFunc(r.recs, compareRec)
	}
	r.sorted = r.sorted[:0]
	for _, x := range r.recs {
		r.sorted = append(r.sorted, r.jobs[x.i])
	}
	copy(r.jobs, r.sorted)
	clear(r.sorted) // drop the pointers, so the pool keeps no job alive
	r.jobs = nil
	rankPool.Put(r)
}

// sortLevel sorts one level's records, given in FIFO order: the records
// whose key2 is +Inf (or NaN, which sorts after it) are moved aside, both
// parts sorted adaptively, then merged back.
func (r *rankKeys) sortLevel(seg []rankRec) {
	if len(seg) < 2 {
		return
	}
	inf := orderBits(math.Inf(1))
	a, b := seg[:0], r.tmp[:0]
	oneKey, k0 := true, seg[0].k
	for _, x := range seg {
		if x.k2 >= inf {
			b = append(b, x)
		} else {
			a = append(a, x) // never overtakes the read position
		}
		oneKey = oneKey && x.k == k0
	}
	r.tmp = b
	adaptiveSort(a)
	adaptiveSort(b)
	if oneKey {
		// Every key2 in a ranks before those in b.
		copy(seg[len(a):], b)
		return
	}
	// Merge from the back: a sits at the front of seg.
	i, k := len(a)-1, len(b)-1
	for w := len(seg) - 1; k >= 0; w-- {
		if i >= 0 && b[k].less(seg[i]) {
			seg[w] = seg[i]
			i--
		} else {
			seg[w] = b[k]
			k--
		}
	}
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
func sortBy(jobs []*Job, key func(*Job) float64) {
	r := newRankKeys(jobs)
	for i, j := range r.jobs {
		r.key[i] = key(j)
	}
	r.sort()
}

// SortFIFO orders jobs by submission time, then sequence, then key.
func SortFIFO(jobs []*Job) {
	sorted := true
	for i := 1; i < len(jobs) && sorted; i++ {
		a, b := jobs[i-1], jobs[i]
		switch a.Submitted.Compare(b.Submitted) {
		case -1:
		case 1:
			sorted = false
		default:
			sorted = fifoCompare(a, b) <= 0
		}
	}
	if sorted {
		return // the usual case: callers keep jobs in arrival order
	}
	slices.SortStableFunc(jobs, fifoCompare)
}
