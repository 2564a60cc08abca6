// The agents' model of an app: its jobs, its later successive-halving
// phases, its budget and demand, and the cluster around it (Env).

package auction

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

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
	// Doubling, when set, makes Demand the last phase's job demand only:
	// each earlier phase's jobs want half the next one's (at least 1), as
	// a sweep whose trials double their GPUs each phase. Unset, every
	// later phase's jobs want Demand.
	Doubling bool
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
	// FilterRho, when positive, is what round-by-round filtering ranks the
	// app by instead of CurrentRho: a caller that knows better than the
	// app's own report (the simulator's themis.filter_truth). 0: CurrentRho.
	FilterRho float64
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

// phases calls f with the job count, per-job work and per-job demand of
// each later phase.
func (a *App) phases(f func(jobs int, work float64, demand int)) {
	if a.Halving == nil {
		return
	}
	med := a.medianIterTime()
	ld := a.laterDemand()
	n := len(a.Jobs)
	last := len(a.Halving.Iters) - 1
	for q, it := range a.Halving.Iters {
		n = max(1, n/2)
		d := ld
		if a.Halving.Doubling {
			d = max(1, ld>>min(last-q, 62))
		}
		f(n, it*med, d)
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
	a.phases(func(n int, w float64, _ int) { b += float64(n) * w })
	return b
}

// demandMax is app_demand_max: the most GPUs the app can use at once, over
// its current and later phases.
func (a *App) demandMax() int {
	d := 0
	for i := range a.Jobs {
		d += a.Jobs[i].Demand
	}
	a.phases(func(n int, _ float64, ld int) { d = max(d, n*ld) })
	return d
}
