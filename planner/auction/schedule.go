// Projected finish times of one phase: the jobs side by side when their
// gangs fit at once (exact makespan), else Graham's longest-first list
// schedule.

package auction

import (
	"math"
	"slices"
	"sort"
)

// task is a job to schedule in a phase.
type task struct {
	work         float64
	demand, gang int
}

// taskTime is how long a task runs on g GPUs at class c: Equation 1's
// iter_left x iter_time(G) with iter_time(G) = iter_time_serial x S(G) /
// min(|G|, demand).
func taskTime(t task, g int, s Sensitivity, c Class) float64 {
	if t.work == 0 {
		return 0
	}
	return t.work * s.slowdown(g, c) / float64(min(g, t.demand))
}

// phaseTime is how long tasks take on p GPUs of class c, T_sh(i) of
// Equation 2 (the phase ends when its last job does), and the GPUs each task
// runs on from the start (0: it waits for others to finish).
//
// When every gang fits at once, the jobs run side by side and the GPUs are
// shared to minimise the phase's makespan exactly: the smallest T such that
// the GPUs each job needs to finish by T add up to at most p (T is one of the
// jobs' run times; the need of a job falls as T grows, so a binary search
// over the sorted run times finds it). Otherwise the jobs run one after
// another on their gangs in longest-first order (Graham's LPT list
// schedule), as section 4.3.3's example serialises four jobs on two GPUs.
// Either way the time never falls as the class gets worse.
func phaseTime(ts []task, p int, s Sensitivity, c Class, withSplit bool) (float64, []int) {
	if len(ts) == 0 {
		return 0, nil
	}
	if p <= 0 {
		return math.Inf(1), nil
	}
	gangs := 0
	for _, t := range ts {
		if t.gang > p {
			return math.Inf(1), nil
		}
		gangs += t.gang
	}
	if gangs > p {
		// List scheduling has anomalies: a slower placement can order the
		// jobs luckier. A better-placed app can always follow a worse
		// placement's schedule (same starts, each job done no later), so
		// it takes the best schedule of its class and the worse ones.
		best, split := listSchedule(ts, p, s, c, withSplit)
		for w := c + 1; int(w) < NumClasses; w++ {
			if t, sp := listSchedule(ts, p, s, w, withSplit); t < best {
				best, split = t, sp
			}
		}
		return best, split
	}
	if len(ts) == 1 {
		t := ts[0]
		g := max(t.gang, min(t.demand, p))
		best, bg := taskTime(t, g, s, c), g
		if t.gang == 1 {
			if one := taskTime(t, 1, s, c); one <= best {
				best, bg = one, 1
			}
		}
		if !withSplit {
			return best, nil
		}
		return best, []int{bg}
	}
	// Candidate makespans: every run time of every task.
	var cand []float64
	for _, t := range ts {
		for g := t.gang; g <= min(t.demand, p); g++ {
			cand = append(cand, taskTime(t, g, s, c))
		}
	}
	sort.Float64s(cand)
	cand = slices.Compact(cand)
	fits := func(T float64) bool {
		sum := 0
		for _, t := range ts {
			n := need(t, T, p, s, c)
			if n < 0 {
				return false
			}
			sum += n
			if sum > p {
				return false
			}
		}
		return true
	}
	i := sort.Search(len(cand), func(i int) bool { return fits(cand[i]) })
	// i < len(cand): the largest candidate is met by every task at its
	// fastest gang, and the gangs fit.
	T := cand[i]
	if !withSplit {
		return T, nil
	}
	split := make([]int, len(ts))
	used := 0
	for k, t := range ts {
		split[k] = need(t, T, p, s, c)
		used += split[k]
	}
	// Hand the GPUs the makespan does not need, one at a time, to the
	// slowest job that one more GPU speeds up.
	for used < p {
		best, bt := -1, 0.0
		for k, t := range ts {
			g := split[k]
			if g >= t.demand {
				continue
			}
			now, next := taskTime(t, g, s, c), taskTime(t, g+1, s, c)
			if next < now && (best < 0 || now > bt) {
				best, bt = k, now
			}
		}
		if best < 0 {
			break
		}
		split[best]++
		used++
	}
	return T, split
}

// need is the fewest GPUs (at least its gang, at most min(demand, p)) with
// which t finishes within T, or -1.
func need(t task, T float64, p int, s Sensitivity, c Class) int {
	for g := t.gang; g <= min(t.demand, p); g++ {
		if taskTime(t, g, s, c) <= T {
			return g
		}
	}
	return -1
}

// longestFirst is the tasks' indices by their run time on their gangs at
// class c, longest first (ties in task order), and those run times.
func longestFirst(ts []task, s Sensitivity, c Class) (order []int, dur []float64) {
	order = make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	dur = make([]float64, len(ts))
	for i, t := range ts {
		dur[i] = taskTime(t, t.gang, s, c)
	}
	sort.SliceStable(order, func(a, b int) bool { return dur[order[a]] > dur[order[b]] })
	return order, dur
}

// listSchedule runs tasks one gang each in longest-first order, each on the
// gang of GPUs that free up first.
func listSchedule(ts []task, p int, s Sensitivity, c Class, withSplit bool) (float64, []int) {
	order, dur := longestFirst(ts, s, c)
	free := make([]float64, p) // when each GPU frees up, kept sorted
	var split []int
	if withSplit {
		split = make([]int, len(ts))
	}
	end := 0.0
	for _, i := range order {
		g := ts[i].gang
		start := free[g-1] // the g earliest GPUs are free[0:g]
		finish := start + dur[i]
		for k := 0; k < g; k++ {
			free[k] = finish
		}
		sort.Float64s(free)
		end = max(end, finish)
		if withSplit && start == 0 {
			split[i] = g
		}
	}
	return end, split
}
