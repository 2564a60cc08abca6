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
	// each job's remaining time is what it has done (Work - Remaining), at
	// least a lease (unknownRemaining's rule). The filter then rests on
	// the work done, not on a forecast.
	FilterAsRun = "as-run"
)

// filterBy sets every app's auction.App.FilterRho as FilterRemaining says.
func (p *Policy) filterBy(r *round) {
	lies := p.LieRemaining
	p.LieRemaining = nil
	defer func() { p.LieRemaining = lies }()
	for i := range r.apps {
		a := &r.apps[i]
		js := r.byApp[a.ID]
		switch p.FilterRemaining {
		case FilterTruth:
			if _, ok := lies[a.ID]; !ok {
				continue
			}
		case FilterAsRun:
			js = p.asRun(js)
		}
		m, ok := p.app(a.ID, js, r.t, r.free, r.grantOf, r.isExpired, map[string]*core.Job{})
		if !ok {
			continue
		}
		m.FairShare = a.FairShare // the share counts demands, which neither changes
		a.FilterRho = m.CurrentRho(r.env)
	}
}

// asRun is the jobs with each one's remaining time replaced by the work it
// has done, at least a lease (FilterAsRun). The work done is Work -
// Remaining where both are known (the simulator's themis.lie_remaining
// liar reports it truthfully: its total is off by as much as its remaining
// time), else the time it has run, Attained / GPUs, which a job that
// reports nothing cannot lower.
func (p *Policy) asRun(js []*core.Job) []*core.Job {
	out := make([]*core.Job, len(js))
	for i, j := range js {
		c := *j
		done := max(0, c.Attained) / max(1, float64(c.GPUs))
		if c.Remaining >= 0 && c.Work >= c.Remaining {
			done = c.Work - c.Remaining
		}
		c.Remaining = max(done, p.Lease)
		c.Work = done + c.Remaining
		out[i] = &c
	}
	return out
}
