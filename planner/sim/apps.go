package sim

import (
	"math"
	"sort"

	"github.com/themis-nomad/themis/planner/trace"
)

// Successive-halving phases (the Themis paper's Workload 2, section 4.3.2).
// A trace job of App a and Phase p > 1 is not submitted when its Submit
// comes (it is not visible to the policy, and does not count as waiting)
// but once every job of phase p-1 of app a has finished; it is then
// submitted at that time (JobResult.Submit, core.Job.Submitted). Jobs of
// phase 0 or 1, and jobs without an App, are never held. A phase with no
// jobs in the trace does not hold the next one.
type gate struct {
	// left[app][p] is how many jobs of phase p of app have not finished.
	left map[string]map[int]int
	// waiting[app][p] is the held jobs of phase p, released together.
	waiting map[string]map[int][]*job
	ready   []*job
	held    int
}

func newGate(jobs []trace.Job) *gate {
	g := &gate{left: map[string]map[int]int{}, waiting: map[string]map[int][]*job{}}
	for _, j := range jobs {
		if j.App == "" || j.Phase < 1 {
			continue
		}
		m := g.left[j.App]
		if m == nil {
			m = map[int]int{}
			g.left[j.App] = m
		}
		m[j.Phase]++
	}
	return g
}

// hold keeps j back if its app's previous phase has not finished.
func (g *gate) hold(j *job) bool {
	app, p := j.tj.App, j.tj.Phase
	if app == "" || p <= 1 || g.left[app][p-1] == 0 {
		return false
	}
	m := g.waiting[app]
	if m == nil {
		m = map[int][]*job{}
		g.waiting[app] = m
	}
	m[p] = append(m[p], j)
	g.held++
	return true
}

// finish records that j finished, and readies the next phase's held jobs
// when j was the last of its phase.
func (g *gate) finish(j *job) {
	app, p := j.tj.App, j.tj.Phase
	if app == "" || p < 1 {
		return
	}
	m := g.left[app]
	if m[p]--; m[p] > 0 {
		return
	}
	if w := g.waiting[app][p+1]; len(w) > 0 {
		g.ready = append(g.ready, w...)
		g.held -= len(w)
		delete(g.waiting[app], p+1)
	}
}

// open returns the jobs readied since the last call.
func (g *gate) open() []*job {
	r := g.ready
	g.ready = nil
	return r
}

// AppResult is what happened to one app: the jobs sharing a trace App (a
// job without one is an app of its own, named by its ID).
type AppResult struct {
	ID string
	// Arrival is the first job's submission; End the last job's finish
	// (meaningful only when Finished: every job of the app finished).
	Arrival, End float64
	Jobs         int
	Finished     bool
	// Work is the app's GPU-seconds at full speed (GPUs x Duration over
	// its jobs); DemandMax the most GPUs it can use at once: the largest
	// sum of its jobs' GPUs over its phases (all its jobs when it has no
	// phases).
	Work      float64
	DemandMax int
	// NAvg is the average contention over the app's lifetime: the number
	// of apps active (arrived and not finished) averaged over [Arrival,
	// End], at least 1.
	NAvg float64
	// Ideal is T_id (the Themis paper, section 4.3): Work / min(R_C,
	// DemandMax) x NAvg, the app's finish time on its own 1/N_avg share of
	// the cluster, run with linear speed-up and no placement slowdown.
	// Rho is (End - Arrival) / Ideal, finish-time fairness; +Inf for an
	// app that did not finish.
	Ideal, Rho float64
	// Placement is the app's mean placement slowdown over its jobs' running
	// time (1: every job always ran on one machine).
	Placement float64
	// SharedIdeal and SharedRho are T_id and ρ with one T_id per app shared
	// by every run of a comparison on the same trace (ShareIdeal); 0 until
	// set. Floor is the app's ρ when it runs alone on the empty cluster
	// (Floors): no schedule gets it below that; 0 until set.
	SharedIdeal, SharedRho, Floor float64
}

// AppResults computes the apps' finish-time fairness from job results
// that came from elsewhere (a live run's jobs, for comparing it with a
// simulated one: e2e's Themis scenario), as Run computes Result.Apps:
// Placement stays 0 (the job results' slowdown is not used).
func AppResults(jobs []JobResult, clusterGPUs int) []AppResult {
	js := make([]*job, len(jobs))
	for i, r := range jobs {
		js[i] = &job{tj: trace.Job{ID: r.ID, App: r.App, Phase: r.Phase, Submit: r.Submit, GPUs: r.GPUs, Duration: r.Duration},
			finished: r.Finished, end: r.End}
	}
	return appResults(js, clusterGPUs)
}

// appResults groups the jobs into apps and computes their finish-time
// fairness.
func appResults(jobs []*job, clusterGPUs int) []AppResult {
	idx := map[string]int{}
	var apps []AppResult
	phaseGPUs := []map[int]int{}
	run := []float64{}
	slow := []float64{}
	for _, j := range jobs {
		id := j.tj.App
		if id == "" {
			id = j.tj.ID
		}
		i, ok := idx[id]
		if !ok {
			i = len(apps)
			idx[id] = i
			apps = append(apps, AppResult{ID: id, Arrival: math.Inf(1), Finished: true})
			phaseGPUs = append(phaseGPUs, map[int]int{})
			run, slow = append(run, 0), append(slow, 0)
		}
		a := &apps[i]
		a.Jobs++
		a.Arrival = math.Min(a.Arrival, j.tj.Submit)
		a.Work += float64(j.tj.GPUs) * j.tj.Duration
		phaseGPUs[i][j.tj.Phase] += j.tj.GPUs
		if j.finished {
			a.End = math.Max(a.End, j.end)
		} else {
			a.Finished = false
		}
		run[i] += j.runSec * float64(j.tj.GPUs)
		slow[i] += j.slowSec * float64(j.tj.GPUs)
	}
	// Contention: N(t) is the number of apps with Arrival <= t < End (an
	// unfinished app stays active to the end).
	type ev struct {
		t float64
		d int
	}
	var evs []ev
	horizon := 0.0
	for i := range apps {
		if apps[i].Finished {
			horizon = math.Max(horizon, apps[i].End)
		}
	}
	for i := range apps {
		a := &apps[i]
		end := a.End
		if !a.Finished {
			end = math.Max(horizon, a.Arrival)
		}
		evs = append(evs, ev{a.Arrival, 1}, ev{end, -1})
	}
	sort.Slice(evs, func(a, b int) bool {
		if evs[a].t != evs[b].t {
			return evs[a].t < evs[b].t
		}
		return evs[a].d < evs[b].d
	})
	ts := make([]float64, 0, len(evs))
	area := make([]float64, 0, len(evs)) // integral of N up to ts[k]
	ns := make([]int, 0, len(evs))       // N from ts[k] on
	n, acc, last := 0, 0.0, 0.0
	for k, e := range evs {
		if k > 0 {
			acc += float64(n) * (e.t - last)
		}
		n += e.d
		last = e.t
		if len(ts) > 0 && ts[len(ts)-1] == e.t {
			area[len(area)-1], ns[len(ns)-1] = acc, n
			continue
		}
		ts, area, ns = append(ts, e.t), append(area, acc), append(ns, n)
	}
	integral := func(t float64) float64 {
		k := sort.SearchFloat64s(ts, t)
		if k < len(ts) && ts[k] == t {
			return area[k]
		}
		if k == 0 {
			return 0
		}
		return area[k-1] + float64(ns[k-1])*(t-ts[k-1])
	}
	for i := range apps {
		a := &apps[i]
		for _, g := range phaseGPUs[i] {
			a.DemandMax = max(a.DemandMax, g)
		}
		if run[i] > 0 {
			a.Placement = slow[i] / run[i]
		}
		a.Rho = math.Inf(1)
		if !a.Finished {
			continue
		}
		a.NAvg = 1
		if a.End > a.Arrival {
			a.NAvg = math.Max(1, (integral(a.End)-integral(a.Arrival))/(a.End-a.Arrival))
		}
		if a.Work > 0 && clusterGPUs > 0 && a.DemandMax > 0 {
			a.Ideal = a.Work / float64(min(clusterGPUs, a.DemandMax)) * a.NAvg
			a.Rho = (a.End - a.Arrival) / a.Ideal
		}
	}
	return apps
}
