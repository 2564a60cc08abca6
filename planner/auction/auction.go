package auction

import (
	"fmt"
	"math"
	"sort"
)

// Bidder is an app taking part in an auction with its bid. App may be nil
// for a bid from an outside agent (NewValuation); its GPUs are then granted
// as one lot (JobGrant with an empty Job).
type Bidder struct {
	App *App
	Val *Valuation
}

// JobGrant is the GPUs one job of an app runs on: its whole gang.
type JobGrant struct {
	Job  string
	GPUs []string
}

// Award is what one app gets in a round.
type Award struct {
	App string
	// Auction is true for an auction winner, false for a leftover grant
	// (section 3.3.2).
	Auction bool
	// GPUs is how many GPUs the app gets and Class the placement class it
	// bid for them; Placed is the class of the GPUs it got (see
	// docs/themis-results.md, "Placement").
	GPUs   int
	Class  Class
	Placed Class
	// Rho0 is the app's ρ_old; Rho its ρ with these GPUs at Placed.
	Rho0, Rho float64
	// C is the partial-allocation fraction c_i (1 for leftover grants).
	C float64
	// Lease is how long the app holds the GPUs, in seconds: c_i of the
	// round's lease for an auction winner (docs/themis-results.md, "Hidden
	// payments"), the whole lease for a leftover grant. Auction leaves it 0.
	Lease float64
	// Jobs are the concrete GPUs, one whole gang per job that starts now.
	Jobs []JobGrant
	// Spare are GPUs of the award no job starts on now: when the app's jobs
	// do not all fit at once they run one after another (the schedule its
	// ρ assumed), and the app's own scheduler starts the later ones on
	// these and on the GPUs earlier jobs release (section 4.2.2, step 5).
	Spare []string
}

// AllGPUs lists the award's GPUs, the jobs' then the spare ones.
func (a *Award) AllGPUs() []string {
	var out []string
	for _, j := range a.Jobs {
		out = append(out, j.GPUs...)
	}
	return append(out, a.Spare...)
}

// AuctionResult is the outcome of one partial allocation auction.
type AuctionResult struct {
	// Awards has one entry per bidder, in bidder order; losers have 0 GPUs.
	Awards []Award
	// PA is the mechanism's outcome over counts, Classes the class of each
	// bidder's proportional-fair allocation.
	PA      PAResult
	Classes []Class
	// Dropped lists bidders whose proportional-fair allocation could not be
	// placed at a class worth having (docs/themis-results.md,
	// "Placement"); their GPUs stayed in the pool.
	Dropped []string
	// Left is the GPUs nobody won, in offer order.
	Left []string
}

// offerGains turns a bid into the gains the mechanism maximises for an
// offer whose largest allocations per class are caps: for each count, the
// best class the offer can hold (the least constrained one among equals,
// which leaves machines to the apps that need them), kept only if it beats
// every smaller count (free disposal: an app never takes GPUs it would
// leave idle). gains[k] = log(ρ(0)/ρ(k)).
func offerGains(v *Valuation, caps [NumClasses]int) ([]float64, []Class) {
	kmax := min(v.max, caps[CrossRack])
	gains := make([]float64, kmax+1)
	classes := make([]Class, kmax+1)
	best := v.Rho0
	for k := 1; k <= kmax; k++ {
		r, cl := math.Inf(1), CrossRack
		for c := CrossRack; ; c-- {
			if k <= caps[c] {
				if x := v.Rho(k, c); x < r {
					r, cl = x, c
				}
			}
			if c == SameMachine {
				break
			}
		}
		if r < best {
			gains[k], classes[k], best = math.Log(v.Rho0/r), cl, r
		} else {
			gains[k] = math.Inf(-1)
		}
	}
	return gains, classes
}

// Auction runs Pseudocode 1's AUCTION on an offer: the exact
// proportional-fair allocation over counts and classes with each winner's
// fraction c_i (PartialAllocation), then placement repair: winners get
// concrete GPUs, the most constrained classes and the largest allocations
// first, and each job of a winner gets a whole gang inside its app's GPUs.
func Auction(bidders []Bidder, offer Offer) (AuctionResult, error) {
	if err := offer.Validate(); err != nil {
		return AuctionResult{}, err
	}
	seen := map[string]bool{}
	for _, b := range bidders {
		if b.Val == nil {
			return AuctionResult{}, fmt.Errorf("auction: bidder without a valuation")
		}
		if seen[b.Val.App] {
			return AuctionResult{}, fmt.Errorf("auction: app %s bids twice", b.Val.App)
		}
		seen[b.Val.App] = true
	}
	p := newPool(offer)
	r := auction(bidders, p)
	r.Left = p.remaining()
	return r, nil
}

func auction(bidders []Bidder, p *pool) AuctionResult {
	caps := p.caps()
	gains := make([][]float64, len(bidders))
	classes := make([][]Class, len(bidders))
	for i, b := range bidders {
		gains[i], classes[i] = offerGains(b.Val, caps)
	}
	pa := PartialAllocation(gains, caps[CrossRack])
	r := AuctionResult{PA: pa, Awards: make([]Award, len(bidders)), Classes: make([]Class, len(bidders))}
	var winners []int
	for i, b := range bidders {
		k := pa.Alloc[i]
		r.Awards[i] = Award{App: b.Val.App, Auction: true, Rho0: b.Val.Rho0, Rho: b.Val.Rho0, C: pa.C[i]}
		if k > 0 {
			r.Classes[i] = classes[i][k]
			winners = append(winners, i)
		}
	}
	sort.SliceStable(winners, func(a, b int) bool {
		ia, ib := winners[a], winners[b]
		if r.Classes[ia] != r.Classes[ib] {
			return r.Classes[ia] < r.Classes[ib]
		}
		return pa.Alloc[ia] > pa.Alloc[ib]
	})
	for _, i := range winners {
		k, c := pa.Alloc[i], r.Classes[i]
		a := &r.Awards[i]
		a.Class = c
		if !grant(a, bidders[i], k, c, p) {
			r.Dropped = append(r.Dropped, a.App)
		}
	}
	return r
}

// grant places k GPUs of class c (or the best class left) for a bidder and
// splits them among its jobs. It fails, taking nothing, when the GPUs left
// cannot hold k at a class the app values above winning nothing.
func grant(a *Award, b Bidder, k int, c Class, p *pool) bool {
	bu, ok := p.placeAtBest(k, c)
	if !ok {
		return false
	}
	placed := p.class(bu)
	rho := b.Val.Rho(k, placed)
	if !(rho < b.Val.Rho0) {
		p.give(bu.gpus())
		return false
	}
	a.GPUs, a.Placed, a.Rho = k, placed, rho
	if b.App == nil {
		a.Jobs = []JobGrant{{GPUs: bu.gpus()}}
		return true
	}
	_, split := b.App.sharedTime(k, placed, true)
	var ids []string
	for i := range b.App.Jobs {
		if b.App.Jobs[i].Held == 0 {
			ids = append(ids, b.App.Jobs[i].ID)
		}
	}
	perJob, rest := splitGangs(bu, split)
	for j, g := range perJob {
		if len(g) > 0 {
			a.Jobs = append(a.Jobs, JobGrant{Job: ids[j], GPUs: g})
		}
	}
	a.Spare = rest
	return true
}

// remaining lists the pool's free GPUs in offer order.
func (p *pool) remaining() []string {
	var out []string
	for _, m := range p.machines {
		for pos, g := range m.all {
			if m.left[pos] {
				out = append(out, g)
			}
		}
	}
	return out
}
