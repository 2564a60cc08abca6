package arbiter

import "github.com/themis-nomad/themis/planner/auction"

// What current ρ estimate round-by-round filtering and the reservation
// rank the apps by (themis.filter_estimate; bids are unchanged). The agents model an app by the jobs it has
// now, but its elapsed time counts from its arrival: the T_id of a sweep
// in its later phases leaves out the work of its finished jobs, and the
// sweep looks several times worse off than it is (docs/themis.md, "Which
// apps set the misses").
const (
	// EstimateCurrent is auction.App.CurrentRho of the visible jobs (the
	// default).
	EstimateCurrent = "current"
	// EstimateWhole is CurrentRho with the app's whole T_id (wholeIdeal):
	// the work of its finished jobs counted, its later phases' demands
	// doubling.
	EstimateWhole = "whole"
	// EstimateFluid is auction.App.ProjectedRho with the app's whole T_id:
	// the ρ the app reaches if it waits a lease and then runs its
	// remaining work on its fair share of the cluster in all.
	EstimateFluid = "fluid"
)

// estimate is the app's filter ρ as FilterEstimate says; m is its model
// with its fair share set.
func (p *Policy) estimate(m *auction.App, env auction.Env) float64 {
	switch p.FilterEstimate {
	case EstimateWhole:
		p.wholeIdeal(m)
	case EstimateFluid:
		p.wholeIdeal(m)
		return m.ProjectedRho(env)
	}
	return m.CurrentRho(env)
}

// wholeIdeal makes the model's T_id the app's whole: its budget counts the
// work of its finished jobs (done.go) besides that of its jobs now and
// later, and its later phases' jobs want twice the GPUs of the phase
// before, the last one Halving.Demand, as the agents' later phases do
// (agents.go). Counted at Halving.Demand each, a sweep's app_demand_max
// comes out up to 2^phases times too large and its T_id as much too small
// (a 63-job sweep: 256 GPUs for its 32).
func (p *Policy) wholeIdeal(m *auction.App) {
	if m.Halving != nil {
		h := *m.Halving
		h.Doubling = true
		m.Halving = &h
	}
	m.Budget = m.Work() + p.done.of(m.ID)
}

// estimating says whether the filter ranks by an estimate of its own
// (FilterEstimate other than EstimateCurrent).
func (p *Policy) estimating() bool {
	return p.FilterEstimate == EstimateWhole || p.FilterEstimate == EstimateFluid
}
