package auction

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// bidTable fills a bid's table, rho[(k-1)*NumClasses+c] = ρ(k, c) for k =
// 1..kmax, with exactly the numbers the straightforward loop
//
//	r := a.SharedTime(k, c) / tid; if !(r < rho0) { r = +Inf }
//
// would give, in far less time. sharedTime redoes, for every k and class,
// the same work: it collects the jobs and, for each phase, builds and sorts
// every run time of every job (Equation 2's makespan split). Here the
// phases are set up once and each phase's makespan is followed as the GPUs
// grow (phaseSweep): the same candidate makespans, the same feasibility
// test, the same answer.
func (a *App) bidTable(rho []float64, kmax int, tid, rho0 float64) {
	s := a.sens()
	cur0, held, heldClass, queued := a.currentPhase(s)
	if len(queued) == 0 {
		// Nothing to run on new GPUs (Bid does not get here).
		for k := 1; k <= kmax; k++ {
			for c := range Class(NumClasses) {
				rho[(k-1)*NumClasses+int(c)] = a.bidEntry(k, c, tid, rho0)
			}
		}
		return
	}
	var now [NumClasses]*phaseSweep
	for c := range Class(NumClasses) {
		now[c] = newPhaseSweep(queued, s, c)
	}
	// Later phases run on all the app's GPUs at the union class, which for
	// k >= 1 depends on c only; one sweep per phase and union class.
	type later struct{ sweeps [NumClasses]*phaseSweep }
	var phases []later
	a.phases(func(n int, w float64, ld int) {
		ts := make([]task, n)
		for i := range ts {
			ts[i] = task{w, ld, 1}
		}
		var l later
		for c := range Class(NumClasses) {
			l.sweeps[c] = newPhaseSweep(ts, s, c)
		}
		phases = append(phases, l)
	})
	for k := 1; k <= kmax; k++ {
		p := held + k
		for c := range Class(NumClasses) {
			cur := max(cur0, now[c].time(k))
			uc := unionClass(heldClass, held, c, k)
			for i := range phases {
				cur += phases[i].sweeps[uc].time(p)
			}
			r := (a.Elapsed + cur) / tid
			if !(r < rho0) {
				r = math.Inf(1)
			}
			rho[(k-1)*NumClasses+int(c)] = r
		}
	}
}

// bidEntry is one entry of the bid table the straightforward way.
func (a *App) bidEntry(k int, c Class, tid, rho0 float64) float64 {
	r := a.SharedTime(k, c) / tid
	if !(r < rho0) {
		r = math.Inf(1)
	}
	return r
}

// phaseSweep is phaseTime(ts, p, s, c, false) for one phase and class,
// asked for p that never decrease.
//
// When every gang fits at once and there are several tasks, phaseTime's
// makespan is the smallest candidate (a run time of some task on some
// g <= min(demand, p) GPUs) at which the tasks fit: fits(T) holds when
// each task can finish by T on between its gang and min(demand, p) GPUs
// and those GPUs add up to at most p, that is when total(T), the sum of
// each task's fewest GPUs up to its demand, is at most p. fits only turns
// from false to true as T grows, so the makespan is the smallest candidate
// at or above T* = the smallest run time on any count up to the demand with
// total(T*) <= p. T* never rises with p: the sweep keeps it as an index
// into the sorted run times and walks it down, computing total once per
// run time, then steps up to the first run time reachable on at most p
// GPUs. (That is T* itself: if T* is a task's run time on g > p GPUs only,
// the task still finishes within T* on min(demand, p) = p GPUs since the
// tasks fit, and no sooner than on g, so T* is its run time on p too.)
type phaseSweep struct {
	ts      []task
	s       Sensitivity
	c       Class
	gangs   int // the sum of the gangs
	maxGang int // the largest gang
	// groups are the distinct tasks with their counts.
	groups []taskCount
	// vals are the distinct run times of the tasks on gang..demand GPUs,
	// in increasing order, and fewest[i] the fewest GPUs on which some task
	// runs for vals[i]. at is T*'s index at lastP.
	vals   []float64
	fewest []int
	totals []int // total(i), -1 until asked
	at     int
	lastP  int
	last   float64
	asked  bool
}

type taskCount struct {
	t task
	n int
}

func newPhaseSweep(ts []task, s Sensitivity, c Class) *phaseSweep {
	e := &phaseSweep{ts: ts, s: s, c: c}
	for _, t := range ts {
		e.gangs += t.gang
		e.maxGang = max(e.maxGang, t.gang)
	}
	return e
}

func (e *phaseSweep) time(p int) float64 {
	if e.asked && p == e.lastP {
		return e.last
	}
	if e.asked && p < e.lastP {
		panic("phaseSweep: p went down")
	}
	e.asked, e.lastP = true, p
	switch {
	case len(e.ts) == 0 || p <= 0 || e.maxGang > p || len(e.ts) == 1:
		e.last, _ = phaseTime(e.ts, p, e.s, e.c, false)
	case e.gangs > p:
		// List scheduling, the best of this class and the worse ones.
		best := listScheduleTime(e.ts, p, e.s, e.c)
		for w := e.c + 1; int(w) < NumClasses; w++ {
			if t := listScheduleTime(e.ts, p, e.s, w); t < best {
				best = t
			}
		}
		e.last = best
	default:
		e.last = e.split(p)
	}
	return e.last
}

// split is the makespan of the tasks run side by side on p GPUs (the gangs
// fit, and there are several tasks).
func (e *phaseSweep) split(p int) float64 {
	if e.vals == nil {
		e.setup()
	}
	// vals[e.at] fits at the last p, so at this one.
	i := e.at
	for i > 0 && e.total(i-1) <= p {
		i--
	}
	e.at = i
	for e.fewest[i] > p {
		i++
	}
	return e.vals[i]
}

// total is how many GPUs the tasks need to finish within vals[i], each on
// the fewest GPUs between its gang and its demand that do it (math.MaxInt
// if one cannot). fits(T) at p is total <= p: a task's fewest GPUs up to
// min(demand, p) are its fewest up to its demand when those are at most p,
// and none otherwise.
func (e *phaseSweep) total(i int) int {
	if e.totals[i] >= 0 {
		return e.totals[i]
	}
	sum := 0
	for _, g := range e.groups {
		n := needSorted(g.t, e.vals[i], math.MaxInt, e.s, e.c)
		if n < 0 {
			sum = math.MaxInt
			break
		}
		sum += n * g.n
	}
	e.totals[i] = sum
	return sum
}

func (e *phaseSweep) setup() {
	for _, t := range e.ts {
		found := false
		for i := range e.groups {
			if e.groups[i].t == t {
				e.groups[i].n++
				found = true
				break
			}
		}
		if !found {
			e.groups = append(e.groups, taskCount{t, 1})
		}
	}
	type run struct {
		v float64
		g int
	}
	n := 0
	for _, gr := range e.groups {
		n += max(0, gr.t.demand-gr.t.gang+1)
	}
	runs := make([]run, 0, n)
	for _, gr := range e.groups {
		t := gr.t
		for g := t.gang; g <= t.demand; g++ {
			runs = append(runs, run{taskTime(t, g, e.s, e.c), g})
		}
	}
	slices.SortFunc(runs, func(x, y run) int {
		if c := cmp.Compare(x.v, y.v); c != 0 {
			return c
		}
		return x.g - y.g
	})
	for _, r := range runs {
		if n := len(e.vals); n > 0 && e.vals[n-1] == r.v {
			continue // sorted by g among equals: the first has the fewest
		}
		e.vals = append(e.vals, r.v)
		e.fewest = append(e.fewest, r.g)
	}
	e.totals = make([]int, len(e.vals))
	for i := range e.totals {
		e.totals[i] = -1
	}
	// The largest run time fits whenever the gangs do.
	e.at = len(e.vals) - 1
}

// needSorted is need(t, T, p, s, c): the fewest GPUs, between t's gang and
// min(demand, p), on which t finishes within T, or -1. From 2 GPUs up the
// run time work x S / g never rises with g (rounding is monotone), so the
// count is found from the estimate work x S / T and checked exactly on
// either side: the same count as need's scan.
func needSorted(t task, T float64, p int, s Sensitivity, c Class) int {
	hi := min(t.demand, p)
	lo := t.gang
	if lo > hi {
		return -1
	}
	if lo <= 1 {
		if taskTime(t, 1, s, c) <= T {
			return 1
		}
		lo = 2
		if lo > hi {
			return -1
		}
	}
	if !(taskTime(t, hi, s, c) <= T) {
		return -1
	}
	g := hi
	if T > 0 {
		if x := math.Ceil(t.work * s[c] / T); x < float64(hi) {
			g = max(lo, int(x))
		}
	}
	for g > lo && taskTime(t, g-1, s, c) <= T {
		g--
	}
	for taskTime(t, g, s, c) > T {
		g++ // stops at hi at the latest
	}
	return g
}

// listScheduleTime is listSchedule(ts, p, s, c, false)'s makespan, keeping
// the GPUs' free times as a sorted list of distinct times with counts
// instead of one entry per GPU: the same multiset, the same schedule.
func listScheduleTime(ts []task, p int, s Sensitivity, c Class) float64 {
	order, dur := longestFirst(ts, s, c)
	type slot struct {
		t float64
		n int
	}
	free := []slot{{0, p}} // increasing t
	end := 0.0
	for _, i := range order {
		g := ts[i].gang
		// start is the g-th earliest free time; take the g earliest GPUs.
		j, left := 0, g
		for free[j].n < left {
			left -= free[j].n
			j++
		}
		start := free[j].t
		finish := start + dur[i]
		free[j].n -= left
		if free[j].n == 0 {
			j++
		}
		free = free[j:]
		// Put g GPUs back at finish.
		k := sort.Search(len(free), func(x int) bool { return free[x].t >= finish })
		if k < len(free) && free[k].t == finish {
			free[k].n += g
		} else {
			free = append(free, slot{})
			copy(free[k+1:], free[k:])
			free[k] = slot{finish, g}
		}
		end = max(end, finish)
	}
	return end
}
