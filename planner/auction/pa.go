package auction

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
// O(n x capacity x table size) in all, less in practice: a table stops
// where every allocation of its apps fits, and step skips the stretches of
// counts that an option cannot improve. Only the maxima are kept per count;
// the walk back recomputes each winner's choice. Ties go to fewer GPUs,
// earlier apps first.
func PartialAllocation(gains [][]float64, capacity int) PAResult {
	n := len(gains)
	capacity = max(capacity, 0)
	// The counts each app accepts, with their gains, in increasing count
	// order: app i's are ks[start[i]:start[i+1]] and gs[...].
	start := make([]int, n+1)
	var ks []int
	var gs []float64
	for i, g := range gains {
		for k := 1; k < len(g) && k <= capacity; k++ {
			if !math.IsInf(g[k], -1) && !math.IsNaN(g[k]) {
				ks = append(ks, k)
				gs = append(gs, g[k])
			}
		}
		start[i+1] = len(ks)
	}
	top := func(i int) int { // app i's largest accepted count
		if start[i+1] > start[i] {
			return ks[start[i+1]-1]
		}
		return 0
	}
	// F[i][c] is constant for c >= the sum of the largest counts of apps
	// 0..i-1 (every allocation fits), and so is B[i][c] for c >= that sum
	// over apps i..n-1: each table stops at that sum or at capacity, and
	// at(tab, c) reads it beyond. The F tables lie end to end in one slice;
	// the B tables are only needed one at a time, for Without.
	fw := make([]int, n+1) // F[i] has fw[i]+1 entries
	for i := 0; i < n; i++ {
		fw[i+1] = min(capacity, fw[i]+top(i))
	}
	fwd := tables(fw)
	for i := 0; i < n; i++ {
		step(fwd[i], fwd[i+1], ks[start[i]:start[i+1]], gs[start[i]:start[i+1]])
	}
	at := func(tab []float64, c int) float64 { return tab[min(c, len(tab)-1)] }

	r := PAResult{Alloc: make([]int, n), C: make([]float64, n), Without: make([]float64, n)}
	r.Objective = at(fwd[n], capacity)
	// Walk back the choices: app i's GPUs in F[i+1][c] are the fewest
	// that reach the best value, 0 if taking none does.
	c := capacity
	for i := n - 1; i >= 0; i-- {
		prev := fwd[i]
		best, bk := at(prev, c), 0
		for j := start[i]; j < start[i+1] && ks[j] <= c; j++ {
			if v := at(prev, c-ks[j]) + gs[j]; v > best {
				best, bk = v, ks[j]
			}
		}
		r.Alloc[i] = bk
		c -= bk
	}
	// B[i+1] in suf, B[i] made in next.
	most := fw[n] // B[0]'s width is F[n]'s
	suf, next := make([]float64, 1, most+1), make([]float64, 0, most+1)
	for i := n - 1; i >= 0; i-- {
		pre := fwd[i]
		// max_c pre[c] + suf[capacity-c]: both tables never fall as c
		// grows, so counts where either is past its end add nothing.
		lo, hi := max(0, capacity-(len(suf)-1)), min(capacity, len(pre)-1)
		best := math.Inf(-1)
		if lo > hi {
			best = pre[len(pre)-1] + suf[len(suf)-1]
		}
		for c := lo; c <= hi; c++ {
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
		next = next[:min(capacity, len(suf)-1+top(i))+1]
		step(suf, next, ks[start[i]:start[i+1]], gs[start[i]:start[i+1]])
		suf, next = next, suf
	}
	return r
}

// tables cuts one slice into tables of w[i]+1 entries.
func tables(w []int) [][]float64 {
	total := 0
	for _, x := range w {
		total += x + 1
	}
	buf := make([]float64, total)
	out := make([][]float64, len(w))
	for i, x := range w {
		out[i], buf = buf[:x+1:x+1], buf[x+1:]
	}
	return out
}

// step cuts the counts into blocks of block counts (from 0), each block
// into parts of mid counts and those into leaves of leaf counts (powers of
// 2, each dividing the one before). seedWidth is how many options either
// side of the previous block's seed a block's seed looks at.
const (
	block     = 64
	mid       = 32
	leaf      = 8
	seedWidth = 16
)

// step is one app's knapsack step: cur[c] = max(prev[c], max over the
// app's options (k, g) of prev[c-k] + g), prev read as constant past its
// end. Options go outer and counts inner (a max-plus convolution with a
// sparse kernel); the values are maxima of the same sums whatever the
// order, so they are those of the count-by-count programme bit for bit.
//
// Most sums do not need adding. prev never falls as c grows (more GPUs
// never hurt), so the largest sum an option (k, g) makes on a run of
// counts c0..c1 is prev[c1-k] + g, rounding being monotone. Inside a block
// cur never falls either, at any point of the loop: it starts as prev with
// one option applied to the whole block (the seed), and skipping an option
// on a run only skips sums that would change nothing. So an option with
// prev[c1-k] + g <= cur[c0] changes nothing on c0..c1 and is skipped there,
// exactly; the test is made on the block, then on its parts and leaves.
// The seed, the best of a few options around the previous block's seed,
// gives cur a high start, so that most tests skip.
func step(prev, cur []float64, ks []int, gs []float64) {
	last := prev[len(prev)-1]
	m := copy(cur, prev)
	for c := m; c < len(cur); c++ {
		cur[c] = last
	}
	lp := len(prev)
	at := func(c int) float64 {
		if c < lp {
			return prev[c]
		}
		return last
	}
	js := 0 // the previous block's seed
	for b0 := 0; b0 < len(cur); b0 += block {
		best, bj := cur[b0], -1
		for j := max(0, js-seedWidth); j < min(len(ks), js+seedWidth+1) && ks[j] <= b0; j++ {
			if v := at(b0-ks[j]) + gs[j]; v > best {
				best, bj = v, j
			}
		}
		if bj < 0 {
			continue
		}
		js = bj
		k, g := ks[bj], gs[bj]
		for c := b0; c < min(b0+block, len(cur)); c++ {
			if v := at(c-k) + g; v > cur[c] {
				cur[c] = v
			}
		}
	}
	for j, k := range ks {
		if k >= len(cur) {
			break
		}
		g := gs[j]
		end := min(len(cur), k+lp) // counts k..end-1 read prev[c-k]
		for b0 := k; b0 < end; {
			b1 := min((b0|(block-1))+1, end)
			if prev[b1-1-k]+g > cur[b0] {
				for m0 := b0; m0 < b1; {
					m1 := min((m0|(mid-1))+1, b1)
					if prev[m1-1-k]+g > cur[m0] {
						for l0 := m0; l0 < m1; {
							l1 := min((l0|(leaf-1))+1, m1)
							if prev[l1-1-k]+g > cur[l0] {
								if l1-l0 == leaf {
									d, s := (*[leaf]float64)(cur[l0:l1]), (*[leaf]float64)(prev[l0-k:l1-k])
									for x := range leaf {
										if v := s[x] + g; v > d[x] {
											d[x] = v
										}
									}
								} else {
									d := cur[l0:l1]
									s := prev[l0-k:]
									s = s[:len(d)]
									for x := range d {
										if v := s[x] + g; v > d[x] {
											d[x] = v
										}
									}
								}
							}
							l0 = l1
						}
					}
					m0 = m1
				}
			}
			b0 = b1
		}
		for c, v := end, last+g; c < len(cur); c++ {
			if v > cur[c] {
				cur[c] = v
			}
		}
	}
}
