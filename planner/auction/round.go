package auction

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Defaults from section 6.4's sensitivity analysis (Figure 19).
const (
	// DefaultFairness is the fairness knob f: the 1-f fraction of apps
	// with the worst ρ bid in each round.
	DefaultFairness = 0.8
	// DefaultLease is the lease length in seconds (10 minutes).
	DefaultLease = 600.0
)

// RoundInput is one auction round (Pseudocode 1, ROUNDBYROUNDAUCTIONS, lines
// 15-21), run on a resource-available event.
type RoundInput struct {
	// Apps are the active apps, running and waiting.
	Apps []App
	// Offer is the free GPUs: released by finished jobs and expired leases.
	Offer Offer
	// Env gives R_C and the lease length (DefaultLease).
	Env Env
	// Fairness is f in [0, 1] (DefaultFairness).
	Fairness float64
	// Seed seeds the random order of leftover grants.
	Seed uint64
	// Cache, when set, keeps bids between rounds (BidCache).
	Cache *BidCache
}

// RoundResult is what a round decides.
type RoundResult struct {
	// Participants are the apps that bid, worst ρ first.
	Participants []string
	// Awards are the auction's winners, in participant order, then the
	// gangs that non-bidders keep (Job.Own), in Apps order, then the
	// leftover grants in the order they were drawn. An app that kept gangs
	// may also have a drawn award.
	Awards []Award
	// Rho is every app's ρ_old (App.RhoWait), the value of winning
	// nothing; the filter sorts on App.CurrentRho.
	Rho map[string]float64
	// Auction is the participants' auction.
	Auction AuctionResult
	// Idle is the GPUs nobody could use, in offer order.
	Idle []string
}

// Round runs one round: every app's agent bids (through the cache when one
// is given), the 1-f fraction of the apps that can use the offer with the
// worst current ρ take part in the partial allocation auction (at least one
// app), each winner holds its GPUs for c_i of the lease, and the GPUs the
// auction leaves go to the apps that did not take part: first each keeps
// the gangs its jobs ran on (Job.Own) that are still whole, then, in a
// random order drawn from Seed, each in turn takes the allocation it values
// most among what is left, for the whole lease (random serial
// dictatorship). Apps that cannot use any GPU of the offer (nothing queued,
// or gangs too large for it) neither bid nor draw leftovers, but keep
// their own gangs.
func Round(in RoundInput) (RoundResult, error) {
	if err := in.Env.validate(); err != nil {
		return RoundResult{}, err
	}
	if !(in.Fairness >= 0 && in.Fairness <= 1) {
		return RoundResult{}, fmt.Errorf("fairness knob f = %v: want a number in [0, 1]", in.Fairness)
	}
	if err := in.Offer.Validate(); err != nil {
		return RoundResult{}, err
	}
	// Bids need no counts beyond the offer (Env.MaxBid).
	env := in.Env
	if n := in.Offer.GPUs(); env.MaxBid <= 0 || n < env.MaxBid {
		env.MaxBid = max(n, 1)
	}
	res := RoundResult{Rho: make(map[string]float64, len(in.Apps))}
	bidders := make([]Bidder, 0, len(in.Apps))
	for i := range in.Apps {
		a := &in.Apps[i]
		if _, dup := res.Rho[a.ID]; dup {
			return RoundResult{}, fmt.Errorf("app %s listed twice", a.ID)
		}
		var v *Valuation
		var err error
		if in.Cache != nil {
			v, err = in.Cache.Bid(a, env)
		} else {
			v, err = Bid(a, env)
		}
		if err != nil {
			return RoundResult{}, err
		}
		res.Rho[a.ID] = v.Rho0
		bidders = append(bidders, Bidder{a, v})
	}
	p := newPool(in.Offer)
	caps := p.caps()
	var eligible []Bidder
	for _, b := range bidders {
		if g, _ := offerGains(b.Val, caps); usable(g) {
			eligible = append(eligible, b)
		}
	}
	// Round-by-round filtering (section 3.3.2): worst current ρ first
	// (App.CurrentRho; ρ_old for a bid from an outside agent).
	// Each app's share is its max-min fair share of the cluster among all
	// active apps, computed here when the caller did not set it.
	var shareOf map[string]float64
	now := make(map[string]float64, len(eligible))
	for _, b := range eligible {
		now[b.Val.App] = b.Val.Rho0
		if b.App != nil {
			a := *b.App
			if a.FairShare <= 0 {
				if shareOf == nil {
					shareOf = make(map[string]float64, len(in.Apps))
					for i, sh := range fairShares(in.Apps, in.Env.ClusterGPUs) {
						shareOf[in.Apps[i].ID] = sh
					}
				}
				a.FairShare = shareOf[a.ID]
			}
			now[b.Val.App] = a.CurrentRho(in.Env)
			if a.FilterRho > 0 {
				now[b.Val.App] = a.FilterRho
			}
		}
	}
	sort.SliceStable(eligible, func(i, j int) bool {
		ri, rj := now[eligible[i].Val.App], now[eligible[j].Val.App]
		if ri != rj {
			return ri > rj
		}
		return eligible[i].Val.App < eligible[j].Val.App
	})
	n := Participants(len(eligible), in.Fairness)
	part, rest := eligible[:n], eligible[n:]
	for _, b := range part {
		res.Participants = append(res.Participants, b.Val.App)
	}
	res.Auction = auction(part, p)
	res.Auction.Left = p.remaining()
	for i := range res.Auction.Awards {
		a := res.Auction.Awards[i]
		if a.GPUs > 0 {
			a.Lease = a.C * in.Env.Lease
			res.Awards = append(res.Awards, a)
		}
	}
	// Incumbents: every app that did not bid, one that cannot use the
	// offer too, keeps the gangs its expired jobs ran on (Job.Own) that the
	// auction left whole, for the whole lease; it then draws leftovers with
	// a new bid in which those jobs run.
	drawers := slices.Clone(rest)
	at := make(map[string]int, len(drawers))
	for i, b := range drawers {
		at[b.Val.App] = i
	}
	bid := make(map[string]bool, len(part))
	for _, b := range part {
		bid[b.Val.App] = true
	}
	for _, b := range bidders {
		if b.App == nil || bid[b.Val.App] || !slices.ContainsFunc(b.App.Jobs, func(j Job) bool { return keepable(&j) }) {
			continue
		}
		a := Award{App: b.Val.App, Rho0: b.Val.Rho0, C: 1, Lease: in.Env.Lease}
		mod := *b.App
		mod.Jobs = slices.Clone(b.App.Jobs)
		queued := 0
		for k := range mod.Jobs {
			j := &mod.Jobs[k]
			if keepable(j) {
				if bu, ok := p.takeExact(j.Own); ok {
					c := p.class(bu)
					a.GPUs += bu.n
					a.Class = max(a.Class, c)
					a.Jobs = append(a.Jobs, JobGrant{Job: j.ID, GPUs: bu.gpus()})
					j.Held, j.HeldClass, j.Own = bu.n, c, nil
				}
			}
			if j.Held == 0 {
				queued++
			}
		}
		if a.GPUs == 0 {
			continue
		}
		a.Placed = a.Class
		a.Rho = b.Val.Rho(a.GPUs, a.Placed)
		res.Awards = append(res.Awards, a)
		nb := Bidder{App: &mod, Val: &Valuation{App: mod.ID, Rho0: a.Rho}}
		if queued > 0 {
			if v, err := Bid(&mod, env); err == nil {
				nb.Val = v
			}
		}
		if i, ok := at[nb.Val.App]; ok {
			drawers[i] = nb
		} else {
			at[nb.Val.App] = len(drawers)
			drawers = append(drawers, nb)
		}
	}
	// Leftover allocation: at random to the apps that did not bid.
	rng := rand.New(rand.NewPCG(in.Seed, in.Seed^0x9e3779b97f4a7c15))
	order := rng.Perm(len(drawers))
	for _, i := range order {
		if p.free == 0 {
			break
		}
		b := drawers[i]
		gains, classes := offerGains(b.Val, p.caps())
		k := 0
		for j := 1; j < len(gains); j++ {
			if gains[j] > math.Inf(-1) && (k == 0 || gains[j] > gains[k]) {
				k = j
			}
		}
		if k == 0 {
			continue
		}
		a := Award{App: b.Val.App, Class: classes[k], Rho0: b.Val.Rho0, C: 1, Lease: in.Env.Lease}
		if grant(&a, b, k, classes[k], p) {
			res.Awards = append(res.Awards, a)
		}
	}
	res.Idle = p.remaining()
	return res, nil
}

// keepable reports whether a job can keep its Own gang: it is queued and
// the gang is a size it runs on.
func keepable(j *Job) bool {
	return j.Held == 0 && len(j.Own) >= j.gang() && len(j.Own) <= j.Demand
}

// usable reports whether a gains table has an allocation worth taking.
func usable(gains []float64) bool {
	for _, g := range gains[1:] {
		if g > math.Inf(-1) {
			return true
		}
	}
	return false
}

// Participants is how many of n apps bid with fairness knob f: the 1-f
// fraction, rounded up, and at least one when there is an app.
func Participants(n int, f float64) int {
	if n == 0 {
		return 0
	}
	k := int(math.Ceil((1-f)*float64(n) - 1e-9))
	return min(max(k, 1), n)
}
