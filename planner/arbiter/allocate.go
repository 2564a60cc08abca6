package arbiter

import (
	"math"
	"time"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// round is one decision's state, which Allocate's steps read and refine in
// turn.
type round struct {
	now   time.Time
	t     float64       // now, in seconds
	lease time.Duration // a whole lease
	jobs  []*core.Job
	free  *core.FreeGPUs
	held  []core.Grant // the running jobs' grants
	// grantOf is each running job's grant.
	grantOf map[core.JobKey]core.Grant
	// byApp is each app's jobs; order the apps by their first job.
	byApp map[string][]*core.Job
	order []string
	// queued counts the queued jobs.
	queued int
	// expiredJobs are the running jobs whose lease is over (isExpired):
	// their GPUs (extra) join the offer and they bid again.
	expiredJobs []*core.Job
	isExpired   map[core.JobKey]bool
	extra       []core.Grant
	// offer is the GPUs the round auctions.
	offer auction.Offer
	env   auction.Env
	// apps are the agents' models of the apps with work left; byID finds
	// the core job of a modelled job.
	apps []auction.App
	byID map[string]*core.Job
	// f is the round's fairness knob (1 when a reservation's app bids
	// alone).
	f float64
	// ended is the jobs whose leases a reservation ended.
	ended []core.JobKey
	// untrusted are the apps with a job whose progress reports the
	// operator does not trust (core.Job.UntrustedProgress): the filter
	// ranks them as-run (filter.go). Nil when none.
	untrusted map[string]bool
}

// Allocate runs one round (docs/themis-results.md, "The arbiter in
// detail"), in steps: observe the apps, contention and leases; offer the
// free GPUs and those under expired leases; model the apps as their agents do; end leases early for
// an app left behind (themis.early_end); hold GPUs for the worst-off app's
// gang (the reservation); run the auction; grant the awards, keeping jobs
// in place where the round allows; stop the expired jobs that lost or
// moved. After an import, what is left of the recorded last decision is
// carried out first (resume.go).
func (p *Policy) Allocate(now time.Time, jobs []*core.Job, free *core.FreeGPUs, held []core.Grant) ([]core.Grant, []core.JobKey) {
	if p.resume {
		p.resume = false
		if grants, stops, ok := p.redo(jobs, held); ok {
			return grants, stops // the last decision's answer, not a new auction
		}
	}
	grants, stops := p.allocate(now, jobs, free, held)
	p.remember(now, grants, stops)
	return grants, stops
}

// allocate is one round, as Allocate describes it.
func (p *Policy) allocate(now time.Time, jobs []*core.Job, free *core.FreeGPUs, held []core.Grant) ([]core.Grant, []core.JobKey) {
	p.waiting = waitingSteady{}
	r := p.observe(now, jobs, free, held)
	if r.queued == 0 && len(r.expiredJobs) == 0 {
		return nil, nil // nothing waits and no lease is over
	}
	p.openOffer(r)
	if r.offer.GPUs() == 0 && !p.EarlyEnd {
		// Nothing to offer, and no lease may end early: until a lease
		// ends or something changes, so it stays (SteadyUntil).
		p.waiting = waitingSteady{at: now, calm: math.Inf(1)}
		return nil, nil
	}
	p.modelApps(r)
	calm := math.Inf(1)
	if p.EarlyEnd {
		calm = p.endEarly(r)
	}
	if r.offer.GPUs() == 0 {
		// Nothing to offer: no lease ended early, nor can one for calm
		// seconds with only the clock moving (SteadyUntil).
		p.waiting = waitingSteady{at: now, calm: calm}
		return nil, nil
	}
	if !p.reserve(r) {
		return nil, r.ended // no round: GPUs gathered for a reservation
	}
	res, ok := p.runRound(r)
	if !ok {
		return nil, r.ended // the round could not run (Err)
	}
	p.report(r, res)
	grants, kept := p.grantAwards(r, res)
	grants, idle := stay(grants, res.Idle, r.isExpired, kept, r.grantOf, r.free)
	repack(grants, idle, r.free)
	return grants, p.endLeases(r, grants, kept)
}

// observe is Allocate's first step: the apps and their jobs, the
// contention (N_avg's clock, and when each app was first seen), and each
// running job's lease (a job granted outside this policy gets a fresh
// one), noting those that are over.
func (p *Policy) observe(now time.Time, jobs []*core.Job, free *core.FreeGPUs, held []core.Grant) *round {
	r := &round{now: now, t: secs(now), lease: time.Duration(p.Lease * float64(time.Second)), jobs: jobs, free: free, held: held,
		f: p.Fairness}
	r.grantOf = make(map[core.JobKey]core.Grant, len(held))
	for _, g := range held {
		r.grantOf[g.Job] = g
	}
	leases := make(map[core.JobKey]time.Time, len(held))
	r.byApp = map[string][]*core.Job{}
	for _, j := range jobs {
		a := appOf(j)
		if _, ok := r.byApp[a]; !ok {
			r.order = append(r.order, a)
		}
		r.byApp[a] = append(r.byApp[a], j)
		if j.UntrustedProgress {
			if r.untrusted == nil {
				r.untrusted = map[string]bool{}
			}
			r.untrusted[a] = true
		}
		switch j.Phase {
		case core.Queued:
			r.queued++
		case core.Granted:
			p.ran[a] = true
			e, ok := p.leases[j.Key]
			if !ok {
				e = now.Add(r.lease) // granted outside this policy: a fresh lease
			}
			leases[j.Key] = e
			if expired(e, now) {
				r.expiredJobs = append(r.expiredJobs, j)
			}
		}
	}
	p.leases = leases
	if p.estimating() {
		p.done.observe(jobs, p.reported)
	}
	p.cont.Set(r.t, len(r.order))
	for _, a := range r.order {
		if _, ok := p.first[a]; !ok {
			p.first[a] = r.t
			p.marks[a] = p.cont.Mark(r.t)
		}
	}
	return r
}

// openOffer is Allocate's second step: the offer is the free GPUs and
// those of the jobs whose lease is over.
func (p *Policy) openOffer(r *round) {
	r.isExpired = make(map[core.JobKey]bool, len(r.expiredJobs))
	for _, j := range r.expiredJobs {
		r.isExpired[j.Key] = true
		r.extra = append(r.extra, r.grantOf[j.Key])
	}
	r.offer = auction.OfferFromNodes(r.free.FreeNodes(r.extra...), nil)
}

// runRound runs the round's auction (auction.Round) on the offer. A round
// that cannot run (a model the agents reject) keeps everything as it is,
// leases renewed, and reports false; Err reports why.
func (p *Policy) runRound(r *round) (auction.RoundResult, bool) {
	p.rounds++
	res, err := auction.Round(auction.RoundInput{Apps: r.apps, Offer: r.offer, Env: r.env, Fairness: r.f,
		Seed: p.seed*0x9e3779b97f4a7c15 + p.rounds})
	if err != nil {
		p.lastErr = err
		for _, j := range r.expiredJobs {
			p.leases[j.Key] = r.now.Add(r.lease)
		}
		return res, false
	}
	return res, true
}
