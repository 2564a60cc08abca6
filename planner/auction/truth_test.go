package auction

import (
	"math"
	"math/rand/v2"
	"testing"
)

// outcome is what the mechanism gives app i: its GPUs, the class it gets
// them at, and its fraction c_i.
type outcome struct {
	k int
	c Class
	f float64
}

func runMechanism(t *testing.T, vals []*Valuation, o Offer) []outcome {
	t.Helper()
	bs := make([]Bidder, len(vals))
	for i, v := range vals {
		bs[i] = Bidder{Val: v}
	}
	r, err := Auction(bs, o)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]outcome, len(vals))
	for i := range vals {
		out[i] = outcome{r.PA.Alloc[i], r.Classes[i], r.PA.C[i]}
	}
	return out
}

// trueRho is the app's true ρ with k GPUs of class c: it uses the best
// number of them (it may leave some idle), or waits.
func trueRho(v *Valuation, k int, c Class) float64 {
	r := v.Rho0
	for j := 1; j <= k; j++ {
		r = math.Min(r, v.Rho(j, c))
	}
	return r
}

// effRho is ρ with the hidden payment: holding the GPUs for a fraction c_i
// of the time, the app's value c_i x ρ_old/ρ (PA's utility) corresponds to
// ρ/c_i.
func effRho(v *Valuation, o outcome) float64 { return trueRho(v, o.k, o.c) / o.f }

// lie rewrites a bid: f maps (k, class, true ρ) to the reported ρ for
// k = 1..upTo, and rho0 is the reported ρ_old.
func lie(t *testing.T, v *Valuation, rho0 float64, upTo int, f func(k int, c Class, r float64) float64) *Valuation {
	t.Helper()
	tab := make([][NumClasses]float64, upTo)
	for k := 1; k <= upTo; k++ {
		for c := range Class(NumClasses) {
			tab[k-1][c] = f(k, c, v.Rho(k, c))
		}
	}
	l, err := NewValuation(v.App, rho0, tab)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTruthTelling is Figure 18's property on random small auctions: an
// app that misreports its ρ table never ends with a better true ρ once the
// hidden payment is counted (ρ/c_i). The lies: Figure 18's strategy
// (under-report the machine-local ρ and over-report the spread ones by X%),
// the reverse, every entry off by up to ±X% at random, an inflated or
// deflated ρ_old, and claiming value for more GPUs than the app can use.
// Without the hidden payment (c_i = 1) some lies do pay, which shows the
// test can tell.
func TestTruthTelling(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	env := Env{ClusterGPUs: 16, Lease: 600}
	instances := 300
	if testing.Short() {
		instances = 80
	}
	checks, paysWithoutPayment := 0, 0
	for inst := 0; inst < instances; inst++ {
		o := randomOffer(rng, 12)
		bs := randomBidders(t, rng, 2+rng.IntN(4), env)
		truth := make([]*Valuation, len(bs))
		for i := range bs {
			truth[i] = bs[i].Val
		}
		honest := runMechanism(t, truth, o)
		for i, v := range truth {
			if v.MaxGPUs() == 0 {
				continue
			}
			var lies []*Valuation
			for _, x := range []float64{0.05, 0.1, 0.2, 0.34, 0.5, 0.9} {
				lies = append(lies,
					lie(t, v, v.Rho0, v.max, func(k int, c Class, r float64) float64 {
						if c == SameMachine {
							return r * (1 - x)
						}
						return r * (1 + x)
					}),
					lie(t, v, v.Rho0, v.max, func(k int, c Class, r float64) float64 {
						if c == SameMachine {
							return r * (1 + x)
						}
						return r * (1 - x)
					}),
					lie(t, v, v.Rho0, v.max, func(k int, c Class, r float64) float64 {
						return r * (1 + x*(2*rng.Float64()-1))
					}),
					lie(t, v, v.Rho0*(1+x), v.max, func(k int, c Class, r float64) float64 { return r }),
					lie(t, v, v.Rho0*(1-x/2), v.max, func(k int, c Class, r float64) float64 { return r }),
				)
			}
			greedy := v.max + 2
			lies = append(lies, lie(t, v, v.Rho0, greedy, func(k int, c Class, r float64) float64 {
				return v.Rho0 * math.Pow(0.5, float64(k))
			}))
			for _, l := range lies {
				reported := append([]*Valuation(nil), truth...)
				reported[i] = l
				got := runMechanism(t, reported, o)
				checks++
				if effRho(v, got[i]) < effRho(v, honest[i])*(1-1e-9) {
					t.Fatalf("instance %d: app %d lies and gets true ρ/c = %v (%+v), honest %v (%+v)",
						inst, i, effRho(v, got[i]), got[i], effRho(v, honest[i]), honest[i])
				}
				if trueRho(v, got[i].k, got[i].c) < trueRho(v, honest[i].k, honest[i].c)*(1-1e-9) {
					paysWithoutPayment++
				}
			}
		}
	}
	t.Logf("%d misreports checked; %d would have paid without the hidden payment", checks, paysWithoutPayment)
	if paysWithoutPayment == 0 {
		t.Errorf("no misreport pays even without the hidden payment: the instances cannot tell")
	}
}
