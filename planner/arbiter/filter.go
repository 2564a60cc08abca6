package arbiter

import "github.com/themis-nomad/themis/planner/core"

// What round-by-round filtering ranks the apps by (themis.filter_remaining).
// The filter picks the 1-f apps with the worst current ρ
// (auction.App.CurrentRho), which divides the time an app has waited and
// would wait by its ideal time, T_id, from the work it says it has: an app
// that claims a tenth of its remaining work has a tenth of the T_id for the
// same waits, looks worse off, bids, and wins the preferred GPUs lease
// after lease (docs/themis.md, "Why under-claiming pays"). The options
// measure that lever; neither is the default.
const (
	// FilterReported ranks every app by the remaining times it reports
	// (the paper's filter; the default).
	FilterReported = "reported"
	// FilterTruth ranks a themis.lie_remaining liar by the current ρ of
	// its true remaining time, which the simulator knows (its bid keeps
	// the lie): what a planner that could verify progress would do.
	FilterTruth = "truth"
	// FilterAsRun ranks every app as if no job reported what it has left:
	// each job's remaining time is as long again as it has done (asRun).
	// The filter then rests on the work done, not on a forecast.
	FilterAsRun = "as-run"
)

// filtering says whether the filter ranks the apps by a ρ of its own
// (filterBy): themis.filter_remaining other than reported,
// themis.filter_estimate other than current, or an app whose progress
// reports are not trusted this round. Every step that models the apps anew
// (modelApps, endEarly) then sets it again.
func (p *Policy) filtering(r *round) bool {
	return p.FilterRemaining != "" && p.FilterRemaining != FilterReported || p.estimating() || len(r.untrusted) > 0
}

// filterBy sets every app's auction.App.FilterRho as FilterRemaining and
// FilterEstimate say; an app with a job whose progress reports are not
// trusted (core.Job.UntrustedProgress: live, where the operator has not
// said trust_progress) is ranked as-run whatever FilterRemaining says, its
// bids keeping the reports (docs/themis.md, "Whose progress counts").
func (p *Policy) filterBy(r *round) {
	// The apps modelled anew below are modelled without the simulator's
	// lies: as-run ignores every claim, truth is the truth.
	lies := p.LieRemaining
	p.LieRemaining = nil
	defer func() { p.LieRemaining = lies }()
	for i := range r.apps {
		a := &r.apps[i]
		_, liar := lies[a.ID]
		m := *a // the round's own model, where the filter sees the jobs as it does
		byRun := p.FilterRemaining == FilterAsRun || r.untrusted[a.ID]
		switch {
		case byRun || p.FilterRemaining == FilterTruth && liar:
			js := r.byApp[a.ID]
			if byRun {
				js = asRun(js, p.Lease)
			}
			var ok bool
			if m, ok = p.app(a.ID, js, r.t, r.free, r.grantOf, r.isExpired, map[string]*core.Job{}); !ok {
				continue
			}
			m.FairShare = a.FairShare // the share counts demands, which neither changes
		case !p.estimating():
			continue // ranked by its own CurrentRho
		}
		a.FilterRho = p.estimate(&m, r.env)
	}
}

// asRun is the jobs with each one's remaining time replaced by as long
// again as it has done (FilterAsRun). A job that reports its progress is
// judged by the work it has done, Work - Remaining, with no floor (app
// floors it at a millisecond; the simulator's themis.lie_remaining liar
// reports it truthfully: its total is off by as much as its remaining
// time). A job that reports nothing is judged as its agent judges it
// (unknownRemaining): by the time it has run, Attained / GPUs, which it
// cannot lower, and at least a lease, so that not reporting never makes
// an app look shorter than reporting would.
func asRun(js []*core.Job, lease float64) []*core.Job {
	out := make([]*core.Job, len(js))
	for i, j := range js {
		c := *j
		done, left := c.Work-c.Remaining, c.Work-c.Remaining
		if !(c.Remaining >= 0 && c.Work >= c.Remaining) {
			done = max(0, c.Attained) / max(1, float64(c.GPUs))
			left = max(done, lease)
		}
		c.Remaining, c.Work = left, done+left
		out[i] = &c
	}
	return out
}
