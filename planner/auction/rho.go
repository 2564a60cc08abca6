// Finish-time fairness: T_id, T_sh over the current and later phases, ρ
// and ρ_old (the value of winning nothing).

package auction

import (
	"math"
)

// IdealTime is T_id, the app's finish time in its own 1/N_avg share of the
// cluster (section 3.2):
//
//	T_id      = T_cluster x N_avg                              (Equations 1, 2)
//	T_cluster = B / min(R_C, app_demand_max)
//
// where B is the app's whole work at the ideal placement (iter_total x
// iter_serial_time for one job, Equation 1; the budget, Equation 2): the app
// run alone on the whole cluster with linear speed-up up to its demand and no
// slowdown, stretched by the average contention.
func (a *App) IdealTime(clusterGPUs int) float64 {
	return a.budget() / float64(min(clusterGPUs, a.demandMax())) * max(1, a.NAvg)
}

// Work is B, the app's whole work at the ideal placement in GPU-seconds
// (Budget, or its jobs' and later phases' work when Budget is 0).
func (a *App) Work() float64 { return a.budget() }

// unionClass is the class of an app's whole allocation (what later phases
// run on) when it holds GPUs of class held and adds new ones of class c: two
// separate allocations span at least two machines, which we take to be in
// one rack.
func unionClass(held Class, heldGPUs int, c Class, k int) Class {
	switch {
	case heldGPUs == 0:
		return c
	case k == 0:
		return held
	}
	return max(c, held, SameRack)
}

// currentPhase splits the app's current jobs: cur is when the running ones
// finish on the GPUs they hold, held their GPUs and heldClass how spread
// those are (separate running gangs are taken to share a rack), queued the
// jobs waiting for new GPUs.
func (a *App) currentPhase(s Sensitivity) (cur float64, held int, heldClass Class, queued []task) {
	running := 0
	for i := range a.Jobs {
		j := &a.Jobs[i]
		if j.Held > 0 {
			cur = max(cur, taskTime(task{j.work(), j.Demand, j.gang()}, j.Held, s, j.HeldClass))
			held += j.Held
			running++
			if j.Held > 1 {
				heldClass = max(heldClass, j.HeldClass)
			}
			continue
		}
		queued = append(queued, task{j.work(), j.Demand, j.gang()})
	}
	if running > 1 {
		heldClass = max(heldClass, SameRack)
	}
	return cur, held, heldClass, queued
}

// sharedTime is T_sh for k new GPUs of class c, the allocation held until
// the app completes (section 4.3.1): the elapsed time, then the current
// phase (running jobs on the GPUs they hold, queued jobs on the k new ones),
// then every later phase on all the app's GPUs (Equation 2: T_sh is the sum
// of the phases' T_sh(i), each the finish of its slowest job). split, when
// asked for, is how the k GPUs are shared among the queued jobs at the start.
func (a *App) sharedTime(k int, c Class, withSplit bool) (float64, []int) {
	s := a.sens()
	cur, held, heldClass, queued := a.currentPhase(s)
	var split []int
	switch {
	case len(queued) > 0:
		t, sp := phaseTime(queued, k, s, c, withSplit)
		cur = max(cur, t)
		split = sp
	case k > 0:
		return math.Inf(1), nil // nothing to run on new GPUs
	}
	p := held + k
	uc := unionClass(heldClass, held, c, k)
	a.phases(func(n int, w float64, ld int) {
		ts := make([]task, n)
		for i := range ts {
			ts[i] = task{w, ld, 1}
		}
		t, _ := phaseTime(ts, p, s, uc, false)
		cur += t
	})
	return a.Elapsed + cur, split
}

// SharedTime is T_sh of Equations 1 and 2 for k new GPUs of class c (see
// sharedTime); +Inf when the app cannot run on them.
func (a *App) SharedTime(k int, c Class) float64 {
	t, _ := a.sharedTime(k, c, false)
	return t
}

// Rho is the finish-time fairness ρ(G) = T_sh(G) / T_id (section 3.2,
// Equation 1) of k new GPUs of class c, assuming the app keeps them until it
// completes. For k = 0 it is ρ with only the GPUs the app holds (+Inf when a
// queued job would never run); RhoWait is what the auction uses instead.
func (a *App) Rho(k int, c Class, clusterGPUs int) float64 {
	return a.SharedTime(k, c) / a.IdealTime(clusterGPUs)
}

// minGPUs is the fewest new GPUs on which every queued job can run (one
// after another): the largest gang of a queued job; 0 when none is queued.
func (a *App) minGPUs() int {
	m := 0
	for i := range a.Jobs {
		if a.Jobs[i].Held == 0 {
			m = max(m, a.Jobs[i].gang())
		}
	}
	return m
}

// RhoWait is ρ_old, the value of winning nothing this round (row 0 of
// Table 2); round-by-round filtering sorts on CurrentRho instead. An app
// with no queued job just runs on: RhoWait is
// Rho(0). An app with queued jobs that wins nothing waits at least one lease
// and, pessimistically, then gets the fewest GPUs it can run on at the worst
// placement:
//
//	ρ_old = ρ(min GPUs, cross-rack) + lease / T_id
//
// It grows with the time the app has waited (T_sh includes the elapsed
// time), as section 3.3.2 requires of a losing app, is finite so that
// log(1/ρ) is defined for every bidder, and exceeds ρ of every allocation
// the app can use, so winning GPUs always helps.
func (a *App) RhoWait(env Env) float64 {
	return a.rhoAfterLease(env, CrossRack, func(m int) int { return m })
}

// rhoAfterLease is ρ if the app waits one more lease and then runs on
// count(m) new GPUs of class c, m being its largest queued gang: Rho(0)
// with nothing queued, +Inf for a gang the cluster cannot hold (it never
// runs).
func (a *App) rhoAfterLease(env Env, c Class, count func(m int) int) float64 {
	return a.rhoAfterWait(env, func(m int) float64 { return a.SharedTime(count(m), c) })
}

// rhoAfterWait is ρ if the app waits one more lease and then finishes at
// finish(m) (from its arrival, less that lease), m being its largest queued
// gang: Rho(0) with nothing queued, +Inf for a gang the cluster cannot
// hold (it never runs).
func (a *App) rhoAfterWait(env Env, finish func(m int) float64) float64 {
	tid := a.IdealTime(env.ClusterGPUs)
	m := a.minGPUs()
	switch {
	case m == 0:
		return a.SharedTime(0, SameMachine) / tid
	case m > env.ClusterGPUs:
		return math.Inf(1)
	}
	return (finish(m) + env.Lease) / tid
}
