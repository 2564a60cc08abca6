package auction

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// paReference is PartialAllocation as it was before the speed work (one
// full-width table per app, the choice stored for every count), kept to
// check the faster programme against bit for bit.
func paReference(gains [][]float64, capacity int) PAResult {
	n := len(gains)
	capacity = max(capacity, 0)
	w := capacity + 1
	// The counts each app accepts, with their gains.
	type option struct {
		k int
		g float64
	}
	opts := make([][]option, n)
	for i, g := range gains {
		for k := 1; k < len(g) && k <= capacity; k++ {
			if !math.IsInf(g[k], -1) && !math.IsNaN(g[k]) {
				opts[i] = append(opts[i], option{k, g[k]})
			}
		}
	}
	fwd := make([]float64, (n+1)*w) // F[i] at fwd[i*w:]
	bwd := make([]float64, (n+1)*w) // B[i] at bwd[i*w:]
	choice := make([]int32, n*w)    // app i's GPUs in F[i+1][c]
	for i := 0; i < n; i++ {
		prev, cur, ch := fwd[i*w:(i+1)*w], fwd[(i+1)*w:(i+2)*w], choice[i*w:(i+1)*w]
		for c := 0; c < w; c++ {
			best, bk := prev[c], 0
			for _, o := range opts[i] {
				if o.k > c {
					break
				}
				if v := prev[c-o.k] + o.g; v > best {
					best, bk = v, o.k
				}
			}
			cur[c], ch[c] = best, int32(bk)
		}
	}
	for i := n - 1; i >= 0; i-- {
		next, cur := bwd[(i+1)*w:(i+2)*w], bwd[i*w:(i+1)*w]
		for c := 0; c < w; c++ {
			best := next[c]
			for _, o := range opts[i] {
				if o.k > c {
					break
				}
				if v := next[c-o.k] + o.g; v > best {
					best = v
				}
			}
			cur[c] = best
		}
	}
	r := PAResult{Alloc: make([]int, n), C: make([]float64, n), Without: make([]float64, n)}
	r.Objective = fwd[n*w+capacity]
	c := capacity
	for i := n - 1; i >= 0; i-- {
		k := int(choice[i*w+c])
		r.Alloc[i] = k
		c -= k
	}
	for i := 0; i < n; i++ {
		pre, suf := fwd[i*w:(i+1)*w], bwd[(i+1)*w:(i+2)*w]
		best := math.Inf(-1)
		for c := 0; c < w; c++ {
			best = max(best, pre[c]+suf[capacity-c])
		}
		r.Without[i] = best
		gi := 0.0
		if r.Alloc[i] > 0 {
			gi = gains[i][r.Alloc[i]]
		}
		// The others' gain in G_pf is at most their best without i, so
		// c_i <= 1 up to rounding.
		r.C[i] = math.Min(1, math.Exp(r.Objective-gi-r.Without[i]))
	}
	return r
}

// sameFloat is bit-for-bit equality (any NaN matches any NaN).
func sameFloat(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}

// samePA reports where two outcomes differ, bit for bit, or "".
func samePA(a, b PAResult) string {
	if len(a.Alloc) != len(b.Alloc) || len(a.C) != len(b.C) || len(a.Without) != len(b.Without) {
		return "lengths"
	}
	if !sameFloat(a.Objective, b.Objective) {
		return fmt.Sprintf("objective %v != %v", a.Objective, b.Objective)
	}
	for i := range a.Alloc {
		switch {
		case a.Alloc[i] != b.Alloc[i]:
			return fmt.Sprintf("alloc %v != %v", a.Alloc, b.Alloc)
		case !sameFloat(a.C[i], b.C[i]):
			return fmt.Sprintf("c_%d %v != %v", i, a.C[i], b.C[i])
		case !sameFloat(a.Without[i], b.Without[i]):
			return fmt.Sprintf("without_%d %v != %v", i, a.Without[i], b.Without[i])
		}
	}
	return ""
}

// tieGains is random gains with many ties: values on a coarse grid (some
// negative, some zero), refused counts, and now and then NaN or +Inf.
func tieGains(rng *rand.Rand, n, kmax int) [][]float64 {
	g := make([][]float64, n)
	for i := range g {
		if rng.IntN(10) == 0 {
			continue // a nil table
		}
		g[i] = make([]float64, 1+rng.IntN(kmax+1))
		inc := rng.IntN(2) == 0 // increasing, as offerGains makes them
		last := 0.0
		for k := 1; k < len(g[i]); k++ {
			switch x := rng.IntN(40); {
			case x < 8:
				g[i][k] = math.Inf(-1)
			case x == 8 && rng.IntN(20) == 0:
				g[i][k] = math.NaN()
			case x == 9 && rng.IntN(50) == 0:
				g[i][k] = math.Inf(1)
			case inc:
				last += float64(rng.IntN(3)) / 4
				g[i][k] = last
			default:
				g[i][k] = float64(rng.IntN(9)-1) / 4
			}
		}
	}
	return g
}

// TestPAMatchesReference checks PartialAllocation against paReference bit
// for bit: random gains with ties, refused counts, NaN and +Inf, tables
// longer than the capacity, and the gains of real bids on real offers.
func TestPAMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	check := func(trial int, gains [][]float64, capacity int) {
		t.Helper()
		if d := samePA(PartialAllocation(gains, capacity), paReference(gains, capacity)); d != "" {
			if len(gains) > 40 {
				gains = nil // too long to print
			}
			t.Fatalf("trial %d (capacity %d, gains %v): %s", trial, capacity, gains, d)
		}
	}
	for trial := 0; trial < 20000; trial++ {
		n := rng.IntN(8)
		kmax := 1 + rng.IntN(12)
		if trial%10 == 0 {
			n, kmax = rng.IntN(40), 1+rng.IntN(80)
		}
		check(trial, tieGains(rng, n, kmax), rng.IntN(3*kmax)-1)
	}
	for trial := 0; trial < 300; trial++ {
		rc := 8 + rng.IntN(300)
		env := Env{ClusterGPUs: rc, Lease: DefaultLease}
		o := randomOffer(rng, rc)
		if trial%2 == 0 {
			o = benchCluster(rc)
		}
		caps := newPool(o).caps()
		n := 1 + rng.IntN(40)
		gains := make([][]float64, n)
		for i := range gains {
			a := randomApp(rng, fmt.Sprintf("a%d", i), rc)
			for j := range a.Jobs {
				a.Jobs[j].Demand *= 1 + rng.IntN(8)
			}
			v, err := Bid(&a, env)
			if err != nil {
				t.Fatal(err)
			}
			gains[i], _ = offerGains(v, caps)
		}
		check(trial, gains, caps[CrossRack])
	}
	// The 4,096-GPU benchmark's auction.
	rng = rand.New(rand.NewPCG(1, 2))
	apps := scaledApps(rng, 200, 4096, 16)
	caps := newPool(benchCluster(4096)).caps()
	gains := make([][]float64, len(apps))
	for i := range apps {
		v, err := Bid(&apps[i], Env{ClusterGPUs: 4096, Lease: DefaultLease})
		if err != nil {
			t.Fatal(err)
		}
		gains[i], _ = offerGains(v, caps)
	}
	check(-1, gains, caps[CrossRack])
}
