package arbiter

import (
	"sort"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// The agents' model: each app's visible core jobs as a auction.App, which
// its agent values offers with (docs/themis-results.md, "Apps and jobs").

// modelApps is Allocate's third step: the round's environment and every
// app with work left as its agent models it, with its max-min fair share of
// the cluster (the filter's and the reservation's current ρ).
func (p *Policy) modelApps(r *round) {
	r.env = auction.Env{ClusterGPUs: r.free.Capacity(), Lease: p.Lease}
	r.byID = map[string]*core.Job{}
	r.apps = make([]auction.App, 0, len(r.order))
	for _, a := range r.order {
		app, ok := p.app(a, r.byApp[a], r.t, r.free, r.grantOf, r.isExpired, r.byID)
		if ok {
			r.apps = append(r.apps, app)
		}
	}
	auction.SetFairShares(r.apps, r.env.ClusterGPUs)
	if p.filtering(r) {
		p.filterBy(r) // themis.filter_remaining and filter_estimate (filter.go)
	}
}

// app builds the auction.App of one app's visible jobs; ok is false when it
// has no work left to model.
func (p *Policy) app(id string, js []*core.Job, t float64, free *core.FreeGPUs, grantOf map[core.JobKey]core.Grant,
	isExpired map[core.JobKey]bool, byID map[string]*core.Job) (auction.App, bool) {
	a := auction.App{ID: id, Elapsed: max(0, t-p.first[id]), NAvg: p.cont.Average(p.marks[id], t)}
	sk, cr := 1.0, 1.0
	later, lastDemand := 0, 0
	var med []float64
	for _, orig := range js {
		j := orig
		g := float64(j.GPUs)
		if j.GPUs < 1 || j.GPUs > free.Capacity() {
			continue // a gang the cluster can never hold
		}
		j = p.reported(id, j)
		sk, cr = max(sk, j.Skew), max(cr, j.CrossRack, j.Skew)
		// A job with no work left (a zero-length job, or one finishing
		// now) still needs its gang to start and end: a millisecond.
		left := max(j.Remaining, 1e-3)
		tot := max(total(j), left)
		jb := auction.Job{ID: j.Key.String(), IterTime: g, ItersLeft: left, ItersTotal: tot, Demand: j.GPUs, Gang: j.GPUs}
		switch {
		case j.Phase == core.Granted && !isExpired[j.Key]:
			jb.Held, jb.HeldClass = j.GPUs, classOf(free, grantOf[j.Key].GPUs)
		case isExpired[j.Key]:
			jb.Own = grantOf[j.Key].GPUs
		}
		byID[jb.ID] = orig
		a.Jobs = append(a.Jobs, jb)
		if j.LaterPhases > later {
			later, lastDemand = j.LaterPhases, j.GPUs<<j.LaterPhases
		}
		med = append(med, tot)
	}
	if len(a.Jobs) == 0 {
		return a, false
	}
	sens := auction.Sensitivity{1, sk, cr}
	if x, ok := p.Lie[id]; ok {
		sens[1] = max(1, 1+(sens[1]-1)*x)
		sens[2] = max(sens[1], 1+(sens[2]-1)*x)
	}
	a.Sens = sens
	if later > 0 {
		// Later phases: each job runs as long as the current ones (their
		// median total) on twice the GPUs; in units of the median current
		// iteration time (the current gang), 2^q x that duration.
		sort.Float64s(med)
		d := med[len(med)/2]
		h := &auction.Halving{Demand: lastDemand}
		for q := 1; q <= later; q++ {
			h.Iters = append(h.Iters, d*float64(int(1)<<q))
		}
		a.Halving = h
	}
	return a, true
}

// reported is the job as its app's agent sees it: with an estimate of its
// remaining time when it reports none, and with the simulator's progress
// lie (themis.lie_remaining) when its app tells one.
func (p *Policy) reported(id string, j *core.Job) *core.Job {
	if j.Remaining < 0 {
		// Live, a job that reports no progress: the agent estimates.
		c := *j
		c.Remaining = p.unknownRemaining(j)
		return &c
	}
	if x, ok := p.LieRemaining[id]; ok {
		// The simulator's progress lie: the app reports x times its
		// remaining time, and a total off by as much.
		c := *j
		if c.Work >= c.Remaining {
			c.Work += c.Remaining * (x - 1)
		}
		c.Remaining *= x
		return &c
	}
	return j
}

// total is a reported job's total work in seconds on its GPUs: known, or
// else what it has left plus what it has run (which overstates the total
// of a job that ran spread).
func total(j *core.Job) float64 {
	if j.Work >= j.Remaining {
		return j.Work
	}
	return j.Remaining + max(0, j.Attained)/float64(max(1, j.GPUs))
}

// unknownRemaining is what an agent assumes is left of a job whose
// remaining time nobody knows (live, a job that reports no progress, or
// whose total is unknown): as long again as it has run, and at least one
// lease. The estimate grows as the job runs, as the attained-service
// schedulers' does (a job that has run long is likely to run long), and a
// fresh job bids for a lease's worth of work. The simulator's jobs always
// know their remaining time, so its results do not depend on this.
func (p *Policy) unknownRemaining(j *core.Job) float64 {
	return max(j.Executed, p.Lease)
}
