package arbiter

import (
	"maps"
	"slices"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// What the last round decided, per app, for operators: the live planner
// records it in Consul (themis/auction/last), `themis status -apps` shows
// it, and the planner logs it with structured fields.

// AppReport and RoundReport are the core's report types (core.Reporter).
type (
	AppReport   = core.AppReport
	RoundReport = core.RoundReport
)

// report records the round's result for LastRound.
func (p *Policy) report(r *round, res auction.RoundResult) {
	bid := map[string]bool{}
	for _, a := range res.Participants {
		bid[a] = true
	}
	by := map[string]*AppReport{}
	rep := RoundReport{At: r.now.UTC(), Round: p.rounds, Offer: r.offer.GPUs()}
	for _, a := range r.apps {
		by[a.ID] = &AppReport{App: a.ID, Rho: res.Rho[a.ID], Bid: bid[a.ID]}
	}
	for _, w := range res.Awards {
		ar := by[w.App]
		if ar == nil {
			ar = &AppReport{App: w.App, Rho: res.Rho[w.App], Bid: bid[w.App]}
			by[w.App] = ar
		}
		ar.Won += w.GPUs
		ar.RhoAfter, ar.Placed, ar.C, ar.Lease = w.Rho, w.Placed.String(), w.C, w.Lease
	}
	for _, a := range slices.Sorted(maps.Keys(by)) {
		rep.Apps = append(rep.Apps, *by[a])
	}
	p.last = &rep
}

// LastRound is the last round that ran, ok false before the first.
func (p *Policy) LastRound() (RoundReport, bool) {
	if p.last == nil {
		return RoundReport{}, false
	}
	return *p.last, true
}
