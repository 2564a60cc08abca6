package themis

import "math"

// PAResult is the outcome of the partial allocation mechanism over GPU
// counts.
type PAResult struct {
	// Alloc is each app's GPUs in the proportional-fair allocation G_pf.
	Alloc []int
	// C is each app's fraction c_i (Pseudocode 1, line 8), in (0, 1]; 1
	// for an app that wins nothing.
	C []float64
	// Objective is the most total gain any allocation reaches:
	// sum_i log(ρ_i(0) / ρ_i(G_pf,i)).
	Objective float64
	// Without[i] is the most total gain of the other apps when app i is
	// left out (the allocation G_pf^-i of line 7).
	Without []float64
}

// PartialAllocation runs Pseudocode 1's AUCTION (lines 6-8) exactly over
// indivisible GPUs. gains[i][k] is app i's gain from k GPUs,
// log(ρ_i(0)/ρ_i(k)) = log(1/ρ_i(k)) - log(1/ρ_i(0)); gains[i][0] is taken as
// 0 and -Inf marks a count the app does not accept. Apps may get at most
// capacity GPUs together.
//
// Maximising the product of the 1/ρ_i is maximising the sum of the gains
// (the ρ_i(0) are constants), and c_i compares the others' products with
// and without app i, in which the ρ_j(0) cancel:
//
//	c_i = prod_{j!=i} 1/ρ_j(G_pf,j) / prod_{j!=i} 1/ρ_j(G_pf,j^-i)
//	    = exp(Objective - gains[i][G_pf,i] - Without[i])
//
// The proportional-fair allocation is a knapsack over counts, solved by
// dynamic programming: F[i][c] is the best gain of apps 0..i-1 on at most c
// GPUs, and B[i][c] that of apps i..n-1. Objective is F[n][capacity] and
// Without[i] = max_c F[i][c] + B[i+1][capacity-c], so the n leave-one-out
// problems cost one more sweep instead of n more knapsacks:
// O(n x capacity x table size) in all. Ties go to fewer GPUs, earlier apps
// first.
func PartialAllocation(gains [][]float64, capacity int) PAResult {
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
