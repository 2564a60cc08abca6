package auction

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Valuation is an agent's bid (section 4.2, Figure 6b; Tables 2 and 3): the
// finish-time fairness ρ the app expects from each allocation it can use,
// and ρ_old for winning nothing. GPUs of one machine are interchangeable, so
// an allocation is a count of GPUs and how spread they are, not a subset of
// GPUs. A Valuation is immutable once built, so caches and callers share it.
type Valuation struct {
	App string
	// Rho0 is ρ_old: see App.RhoWait.
	Rho0 float64
	max  int
	rho  []float64 // ρ(k, c) at (k-1)*NumClasses + c, k = 1..max
}

// Rho is ρ for k new GPUs of class c: Rho0 for k = 0, +Inf for an
// allocation the app cannot use or that would not beat winning nothing.
func (v *Valuation) Rho(k int, c Class) float64 {
	if k == 0 {
		return v.Rho0
	}
	if k < 0 || k > v.max || int(c) >= NumClasses {
		return math.Inf(1)
	}
	return v.rho[(k-1)*NumClasses+int(c)]
}

// MaxGPUs is the most new GPUs the app can use; 0 means it does not bid.
func (v *Valuation) MaxGPUs() int { return v.max }

// NewValuation builds a bid from a table: rho[k-1][c] is ρ for k GPUs of
// class c (+Inf where the app cannot use them). Entries that do not beat
// rho0 are treated as +Inf. It lets callers with their own agents (an app
// reporting its own estimates, section 4.3) take part in auctions.
func NewValuation(app string, rho0 float64, rho [][NumClasses]float64) (*Valuation, error) {
	if !(rho0 > 0) || math.IsInf(rho0, 0) {
		return nil, fmt.Errorf("app %s: ρ_old = %v: want a positive number", app, rho0)
	}
	v := &Valuation{App: app, Rho0: rho0, max: len(rho), rho: make([]float64, len(rho)*NumClasses)}
	for k := range rho {
		for c, r := range rho[k] {
			if math.IsNaN(r) || r <= 0 {
				return nil, fmt.Errorf("app %s: ρ(%d, %s) = %v: want a positive number or +Inf", app, k+1, Class(c), r)
			}
			if !(r < rho0) {
				r = math.Inf(1)
			}
			v.rho[k*NumClasses+c] = r
		}
	}
	return v, nil
}

// Bid is the agent's valuation of an app (section 4.3): ρ_old, and ρ for
// every count of new GPUs up to what its queued jobs can use (at most the
// cluster) at every placement class, by Equations 1 and 2. The table does
// not depend on the offer: the arbiter reads the entries the offer can
// satisfy.
func Bid(a *App, env Env) (*Valuation, error) {
	if err := env.validate(); err != nil {
		return nil, err
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	v := &Valuation{App: a.ID, Rho0: a.RhoWait(env)}
	if a.minGPUs() == 0 || math.IsInf(v.Rho0, 0) {
		// Nothing queued, or a queued gang larger than the cluster.
		return v, nil
	}
	demand := 0
	for i := range a.Jobs {
		if a.Jobs[i].Held == 0 {
			demand += a.Jobs[i].Demand
		}
	}
	v.max = min(demand, env.ClusterGPUs)
	if env.MaxBid > 0 {
		v.max = min(v.max, env.MaxBid)
	}
	v.rho = make([]float64, v.max*NumClasses)
	// ρ(k, c) = SharedTime(k, c) / T_id, +Inf where it does not beat ρ_old
	// (bidTable computes exactly that, sweeping k).
	a.bidTable(v.rho, v.max, a.IdealTime(env.ClusterGPUs), v.Rho0)
	return v, nil
}

// BidCache keeps each app's last bid. The proof of Theorem 3.3 has agents
// answer from the cached ρ table of their last auction: an app whose state
// has not changed gets the same bid back (the same pointer), so it cannot
// bid one way for the filter and another for the auction, and its ρ after
// a leftover grant is read from the table it bid with.
type BidCache struct {
	last map[string]cachedBid
}

type cachedBid struct {
	key string
	v   *Valuation
}

// NewBidCache returns an empty cache.
func NewBidCache() *BidCache { return &BidCache{last: map[string]cachedBid{}} }

// Bid returns the app's cached bid if the app and the environment are
// exactly as when it was made, and otherwise a new bid, which it caches.
func (b *BidCache) Bid(a *App, env Env) (*Valuation, error) {
	key := stateKey(a, env)
	if c, ok := b.last[a.ID]; ok && c.key == key {
		return c.v, nil
	}
	v, err := Bid(a, env)
	if err != nil {
		return nil, err
	}
	b.last[a.ID] = cachedBid{key, v}
	return v, nil
}

// Forget drops an app's bid (the app finished).
func (b *BidCache) Forget(app string) { delete(b.last, app) }

// Len is the number of apps with a cached bid.
func (b *BidCache) Len() int { return len(b.last) }

// stateKey encodes everything a bid depends on.
func stateKey(a *App, env Env) string {
	buf := make([]byte, 0, 64+len(a.ID)+len(a.Jobs)*64)
	f := func(v float64) { buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v)) }
	i := func(v int) { buf = binary.LittleEndian.AppendUint64(buf, uint64(int64(v))) }
	str := func(s string) { i(len(s)); buf = append(buf, s...) }
	i(env.ClusterGPUs)
	i(env.MaxBid)
	f(env.Lease)
	str(a.ID)
	f(a.Elapsed)
	f(a.NAvg)
	for _, s := range a.sens() {
		f(s)
	}
	f(a.Budget)
	i(len(a.Jobs))
	for k := range a.Jobs {
		j := &a.Jobs[k]
		str(j.ID)
		f(j.IterTime)
		f(j.ItersLeft)
		f(j.ItersTotal)
		i(j.Demand)
		i(j.Gang)
		i(j.Held)
		i(int(j.HeldClass))
	}
	if h := a.Halving; h != nil {
		i(1)
		i(h.Demand)
		i(len(h.Iters))
		for _, it := range h.Iters {
			f(it)
		}
	} else {
		i(0)
	}
	return string(buf)
}
