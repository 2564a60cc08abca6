package arbiter

import (
	"maps"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/auction"
)

// What the last round decided, per app, for operators: the live planner
// records it in Consul (themis/auction/last), `themis status -apps` shows
// it, and the planner logs it with structured fields.

// AppReport is one app's part in a round.
type AppReport struct {
	App string `json:"app"`
	// Rho is the app's ρ if it won nothing this round (ρ_old: its
	// finish-time fairness now); RhoAfter its ρ with what it won (0 when
	// it won nothing).
	Rho      float64 `json:"rho"`
	RhoAfter float64 `json:"rho_after,omitempty"`
	// Bid says whether the app took part in the auction (the 1-f worst
	// off); the others drew leftovers or kept their gangs.
	Bid bool `json:"bid"`
	// Won is the GPUs the app got this round (auction or leftovers),
	// Placed the placement class of the last award, C its partial
	// allocation fraction, and Lease how long it holds them, in seconds.
	Won    int     `json:"won"`
	Placed string  `json:"placed,omitempty"`
	C      float64 `json:"c,omitempty"`
	Lease  float64 `json:"lease_s,omitempty"`
}

// RoundReport is one round's result.
type RoundReport struct {
	At    time.Time   `json:"at"`
	Round uint64      `json:"round"`
	Offer int         `json:"offer_gpus"`
	Apps  []AppReport `json:"apps"`
}

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
