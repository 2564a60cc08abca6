package themis

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Class is how spread an allocation's GPUs are (section 4.3.1 and its
// footnote 3): all on one machine, on several machines of one rack, or on
// several racks. Classes are ordered: a higher class is never faster.
type Class uint8

const (
	// SameMachine: all GPUs on one machine.
	SameMachine Class = iota
	// SameRack: several machines of one rack.
	SameRack
	// CrossRack: machines of several racks.
	CrossRack
)

// NumClasses is the number of placement classes.
const NumClasses = 3

var classNames = [NumClasses]string{"machine", "rack", "cross-rack"}

func (c Class) String() string {
	if int(c) < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// Sensitivity is the slowdown S(G) per placement class (Equation 1): the
// factor by which a job's iteration time grows when its GPUs are spread that
// far. Section 4.3.1, footnote 3, starts from 1 on one machine, 1.1 across
// machines and 1.3 across racks and refines the values by profiling; callers
// pass per-model values (the simulator's model classes). A one-GPU job is
// always on one machine and runs at S[SameMachine].
type Sensitivity [NumClasses]float64

// DefaultSensitivity is footnote 3's starting estimate.
var DefaultSensitivity = Sensitivity{1, 1.1, 1.3}

// Validate reports whether every factor is positive and finite and the
// factors do not decrease as the placement spreads.
func (s Sensitivity) Validate() error {
	for c, v := range s {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("slowdown %s = %v: want a positive number", Class(c), v)
		}
		if c > 0 && v < s[c-1] {
			return fmt.Errorf("slowdown %s = %v is below %s = %v: spreading a job never speeds it up", Class(c), v, Class(c-1), s[c-1])
		}
	}
	return nil
}

// slowdown is S for a gang of g GPUs placed at class c.
func (s Sensitivity) slowdown(g int, c Class) float64 {
	if g <= 1 {
		return s[SameMachine]
	}
	return s[c]
}

// Job is one training job of an app (section 2.1): synchronous SGD with a
// fixed batch, so its iteration time falls linearly with its GPUs up to its
// demand and grows by S(G) when spread (Equation 1).
type Job struct {
	ID string
	// IterTime is iter_time_serial: seconds per iteration on one GPU at the
	// ideal placement. A caller that only knows remaining GPU-seconds sets
	// IterTime to them and ItersLeft to 1.
	IterTime float64
	// ItersLeft is iter_left; ItersTotal is iter_total (T_cluster of
	// Equation 1 uses the whole job's work).
	ItersLeft, ItersTotal float64
	// Demand is job_demand_max: the most GPUs the job can use.
	Demand int
	// Gang is the fewest GPUs the job runs on (0 means 1); a job runs on
	// one gang of between Gang and Demand GPUs, never on part of one.
	Gang int
	// Held is how many GPUs the job runs on under a lease that has not
	// expired; 0 means the job is queued. A running job is not resized: new
	// GPUs go to queued jobs. HeldClass is how those GPUs are spread.
	Held      int
	HeldClass Class
	// Own, for a queued job whose lease just ended, is the gang it ran on
	// (GPUs of the offer). An app that does not bid keeps such a gang, if
	// the auction left it whole, before the leftovers are drawn (Round).
	// Bids do not depend on it.
	Own []string
}

func (j *Job) gang() int { return max(j.Gang, 1) }

func (j *Job) work() float64 { return j.ItersLeft * j.IterTime }

// Halving describes the phases of successive halving (section 4.3.2) that
// follow the current one: each keeps the better half of the previous phase's
// jobs (at least one) and runs each for Iters[p] iterations. As in the
// paper's example (section 4.3.3), the jobs of later phases are estimated by
// the median iteration time of the current jobs.
type Halving struct {
	Iters []float64
	// Demand is each later job's job_demand_max; 0 means the largest
	// demand among the current jobs. Later jobs are elastic (gang 1).
	Demand int
}

// App is an ML app (section 2.1): one job, or several hyper-parameter
// trials of one model, which finishes when its last job does.
type App struct {
	ID string
	// Elapsed is T_current - T_start in seconds: the time since the app
	// arrived, queueing included.
	Elapsed float64
	// NAvg is N_avg: the number of apps in the cluster averaged over the
	// app's lifetime so far (Contention tracks it). Values below 1 count
	// as 1.
	NAvg float64
	// Sens is the slowdown of the app's model (its jobs train the same
	// model); the zero value means DefaultSensitivity.
	Sens Sensitivity
	// Jobs are the jobs of the current phase, running and queued.
	Jobs []Job
	// Halving, when set, models the app's later successive-halving phases
	// (Equation 2); nil means the current jobs are all there is (single-job
	// apps, and performance-curve stopping where each job's ItersLeft is its
	// forecast termination).
	Halving *Halving
	// FairShare is the app's share of the cluster in GPUs for its current
	// ρ estimate (CurrentRho); 0 means R_C / N_avg. Round sets it.
	FairShare float64
	// Budget is B of Equation 2, the app's total work in GPU-seconds at
	// the ideal placement; 0 means the sum of its jobs' ItersTotal x
	// IterTime plus the later phases' work.
	Budget float64
}

// Env is what an agent needs to know about the cluster besides the offer.
type Env struct {
	// ClusterGPUs is R_C, the cluster's GPUs (T_cluster of Equation 1).
	ClusterGPUs int
	// Lease is the lease length in seconds. An app that wins nothing waits
	// at least one lease more (see RhoWait).
	Lease float64
	// MaxBid, when positive, caps the GPU counts a bid values (Bid's
	// table stops there): an arbiter only reads the counts its offer can
	// hold, so Round caps bids at the offer's size, which changes no
	// outcome and saves most of the agents' work when few GPUs are free.
	MaxBid int
}

func (e Env) validate() error {
	if e.ClusterGPUs <= 0 {
		return fmt.Errorf("cluster GPUs = %d: want at least 1", e.ClusterGPUs)
	}
	if !(e.Lease > 0) || math.IsInf(e.Lease, 0) {
		return fmt.Errorf("lease = %v s: want a positive number of seconds", e.Lease)
	}
	return nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// Validate checks that the app describes a model Equation 1 or 2 can
// evaluate.
func (a *App) Validate() error {
	if a.ID == "" {
		return errors.New("app without an ID")
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("app %s: %s", a.ID, fmt.Sprintf(format, args...))
	}
	if !finiteNonNeg(a.Elapsed) {
		return fail("elapsed = %v s: want a non-negative number", a.Elapsed)
	}
	if !finiteNonNeg(a.NAvg) {
		return fail("N_avg = %v: want a non-negative number", a.NAvg)
	}
	if err := a.sens().Validate(); err != nil {
		return fail("%v", err)
	}
	if len(a.Jobs) == 0 {
		return fail("no jobs")
	}
	for i := range a.Jobs {
		j := &a.Jobs[i]
		if !(j.IterTime > 0) || math.IsInf(j.IterTime, 0) {
			return fail("job %s: iteration time = %v s: want a positive number", j.ID, j.IterTime)
		}
		if !finiteNonNeg(j.ItersLeft) || !finiteNonNeg(j.ItersTotal) || j.ItersTotal < j.ItersLeft {
			return fail("job %s: iterations left %v of %v: want 0 <= left <= total", j.ID, j.ItersLeft, j.ItersTotal)
		}
		if j.Demand < 1 || j.Gang < 0 || j.Gang > j.Demand {
			return fail("job %s: gang %d, demand %d: want 0 <= gang <= demand, demand >= 1", j.ID, j.Gang, j.Demand)
		}
		if j.Held != 0 && (j.Held < j.gang() || j.Held > j.Demand) {
			return fail("job %s: holds %d GPUs: want 0 or between its gang %d and its demand %d", j.ID, j.Held, j.gang(), j.Demand)
		}
		if int(j.HeldClass) >= NumClasses {
			return fail("job %s: %v", j.ID, j.HeldClass)
		}
	}
	if h := a.Halving; h != nil {
		if h.Demand < 0 {
			return fail("halving demand %d: want >= 0", h.Demand)
		}
		for _, it := range h.Iters {
			if !finiteNonNeg(it) {
				return fail("halving iterations %v: want non-negative numbers", h.Iters)
			}
		}
	}
	if !finiteNonNeg(a.Budget) {
		return fail("budget = %v: want a non-negative number", a.Budget)
	}
	if !(a.budget() > 0) {
		return fail("no work: T_id would be 0")
	}
	return nil
}

func (a *App) sens() Sensitivity {
	if a.Sens == (Sensitivity{}) {
		return DefaultSensitivity
	}
	return a.Sens
}

// medianIterTime is the iteration time of the median current job, which
// section 4.3.3 uses for the jobs of later phases.
func (a *App) medianIterTime() float64 {
	ts := make([]float64, len(a.Jobs))
	for i := range a.Jobs {
		ts[i] = a.Jobs[i].IterTime
	}
	sort.Float64s(ts)
	n := len(ts)
	if n%2 == 1 {
		return ts[n/2]
	}
	return (ts[n/2-1] + ts[n/2]) / 2
}

// laterDemand is the job_demand_max of later-phase jobs.
func (a *App) laterDemand() int {
	if a.Halving != nil && a.Halving.Demand > 0 {
		return a.Halving.Demand
	}
	d := 0
	for i := range a.Jobs {
		d = max(d, a.Jobs[i].Demand)
	}
	return d
}

// phases calls f with the job count and per-job work of each later phase.
func (a *App) phases(f func(jobs int, work float64)) {
	if a.Halving == nil {
		return
	}
	med := a.medianIterTime()
	n := len(a.Jobs)
	for _, it := range a.Halving.Iters {
		n = max(1, n/2)
		f(n, it*med)
	}
}

// budget is B: the given one, or the work of the current jobs and of the
// later phases.
func (a *App) budget() float64 {
	if a.Budget > 0 {
		return a.Budget
	}
	b := 0.0
	for i := range a.Jobs {
		b += a.Jobs[i].ItersTotal * a.Jobs[i].IterTime
	}
	a.phases(func(n int, w float64) { b += float64(n) * w })
	return b
}

// demandMax is app_demand_max: the most GPUs the app can use at once, over
// its current and later phases.
func (a *App) demandMax() int {
	d := 0
	for i := range a.Jobs {
		d += a.Jobs[i].Demand
	}
	ld := a.laterDemand()
	a.phases(func(n int, _ float64) { d = max(d, n*ld) })
	return d
}

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
	ld := a.laterDemand()
	a.phases(func(n int, w float64) {
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
	tid := a.IdealTime(env.ClusterGPUs)
	m := a.minGPUs()
	switch {
	case m == 0:
		return a.SharedTime(0, SameMachine) / tid
	case m > env.ClusterGPUs:
		return math.Inf(1)
	}
	return (a.SharedTime(count(m), c) + env.Lease) / tid
}

// Contention tracks N, the number of active apps, over time, so that each
// app's N_avg (Equation 1) is the time-weighted average of N since it
// arrived. Times are seconds on any clock that never goes back.
type Contention struct {
	t, area float64
	n       int
	started bool
}

// Set records that n apps are active from time t on.
func (c *Contention) Set(t float64, n int) {
	if c.started {
		c.area = c.Area(t)
	}
	c.t, c.n, c.started = max(t, c.t), n, true
}

// Area is the integral of N from the first Set to t.
func (c *Contention) Area(t float64) float64 {
	if !c.started || t <= c.t {
		return c.area
	}
	return c.area + float64(c.n)*(t-c.t)
}

// Mark is a point to average from: keep one per app, taken when it arrives.
type Mark struct{ T, Area float64 }

// Mark returns the current point for averaging from time t.
func (c *Contention) Mark(t float64) Mark { return Mark{t, c.Area(t)} }

// Average is N_avg over [m.T, t]; at m.T itself it is the current N.
func (c *Contention) Average(m Mark, t float64) float64 {
	if t <= m.T {
		return float64(c.n)
	}
	return (c.Area(t) - m.Area) / (t - m.T)
}
