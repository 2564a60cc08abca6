package auction

import (
	"math"
	"math/rand/v2"
	"testing"
)

// gainsOf turns ρ tables (rho[k], rho[0] = ρ_old, +Inf = not accepted) into
// the mechanism's gains.
func gainsOf(rhos ...[]float64) [][]float64 {
	out := make([][]float64, len(rhos))
	for i, r := range rhos {
		out[i] = make([]float64, len(r))
		for k := 1; k < len(r); k++ {
			out[i][k] = math.Log(r[0] / r[k])
		}
	}
	return out
}

// literalC is Pseudocode 1, line 8, as printed: the others' product of
// 1/ρ in G_pf over their product in G_pf^-i.
func literalC(rhos [][]float64, i int, pf, without []int) float64 {
	num, den := 1.0, 1.0
	for j := range rhos {
		if j == i {
			continue
		}
		num *= 1 / rhos[j][pf[j]]
		den *= 1 / rhos[j][without[j]]
	}
	return num / den
}

// TestPAHandTwoApps: two GPUs, A: ρ = 4, 2, 1 for 0, 1, 2 GPUs; B: ρ = 3,
// 1.2, 1. Products of 1/ρ: (2,0) 1/4... A alone 1/1 x 1/3, split 1/2 x
// 1/1.2, B alone 1/4 x 1/1: the split wins (1/2.4 > 1/3 > 1/4). Without A,
// B takes both (ρ_B = 1); without B, A takes both (ρ_A = 1). So
// c_A = (1/1.2) / (1/1) = 0.8333 and c_B = (1/2) / (1/1) = 0.5.
func TestPAHandTwoApps(t *testing.T) {
	rhos := [][]float64{{4, 2, 1}, {3, 1.2, 1}}
	r := PartialAllocation(gainsOf(rhos...), 2)
	if !equalInts(r.Alloc, []int{1, 1}) {
		t.Fatalf("G_pf = %v, want [1 1]", r.Alloc)
	}
	want := []float64{1 / 1.2, 0.5}
	for i := range want {
		if !near(r.C[i], want[i]) {
			t.Errorf("c_%d = %v, want %v", i, r.C[i], want[i])
		}
	}
	if !near(r.C[0], literalC(rhos, 0, r.Alloc, []int{0, 2})) || !near(r.C[1], literalC(rhos, 1, r.Alloc, []int{2, 0})) {
		t.Errorf("c = %v disagrees with Pseudocode 1 line 8", r.C)
	}
	if !near(r.Objective, math.Log(4.0/2)+math.Log(3/1.2)) {
		t.Errorf("objective %v", r.Objective)
	}
	if !near(r.Without[0], math.Log(3)) || !near(r.Without[1], math.Log(4)) {
		t.Errorf("without = %v, want [log 3, log 4]", r.Without)
	}
}

// TestPAHandThreeGangs: four GPUs, gangs A (2 GPUs: ρ 3 -> 1), B (2: 2 ->
// 1), C (3: 4 -> 1). A+B gives 3 x 2 = 6 times the product of ρ_old, C
// alone 4, A alone 3: G_pf = {A, B}. Without A the best is C (4); without
// B, also C. So c_A = (1 x 1/4) / (1/2 x 1) = 0.5, c_B = (1 x 1/4) / (1/3 x
// 1) = 0.75, and C, which wins nothing, keeps c = 1.
func TestPAHandThreeGangs(t *testing.T) {
	inf := math.Inf(1)
	rhos := [][]float64{{3, inf, 1}, {2, inf, 1}, {4, inf, inf, 1}}
	r := PartialAllocation(gainsOf(rhos...), 4)
	if !equalInts(r.Alloc, []int{2, 2, 0}) {
		t.Fatalf("G_pf = %v, want [2 2 0]", r.Alloc)
	}
	for i, w := range []float64{0.5, 0.75, 1} {
		if !near(r.C[i], w) {
			t.Errorf("c_%d = %v, want %v", i, r.C[i], w)
		}
	}
	for i, without := range [][]int{{0, 0, 3}, {0, 0, 3}, {2, 2, 0}} {
		if got := literalC(rhos, i, r.Alloc, without); !near(r.C[i], got) {
			t.Errorf("c_%d = %v, Pseudocode 1 line 8 gives %v", i, r.C[i], got)
		}
	}
	// With one GPU more, C fits beside a 2-GPU gang: A + C (3 x 4 = 12)
	// beats A + B (6), and B pays for nothing.
	r = PartialAllocation(gainsOf(rhos...), 5)
	if !equalInts(r.Alloc, []int{2, 0, 3}) {
		t.Fatalf("5 GPUs: G_pf = %v, want [2 0 3]", r.Alloc)
	}
	// Without A: B + C (2 x 4 = 8) vs A's presence leaving C 4: c_A =
	// (1/ρ_B(0) x 1/ρ_C(3)) / (1/ρ_B(2) x 1/ρ_C(3)) = (1/2) / 1.
	if !near(r.C[0], 0.5) || !near(r.C[2], literalC(rhos, 2, r.Alloc, []int{2, 2, 0})) || r.C[1] != 1 {
		t.Errorf("5 GPUs: c = %v, want [0.5 1 %v]", r.C, literalC(rhos, 2, r.Alloc, []int{2, 2, 0}))
	}
}

func TestPAEdges(t *testing.T) {
	r := PartialAllocation(nil, 8)
	if len(r.Alloc) != 0 || r.Objective != 0 {
		t.Errorf("no apps: %+v", r)
	}
	r = PartialAllocation(gainsOf([]float64{2, 1}), 0)
	if r.Alloc[0] != 0 || r.C[0] != 1 {
		t.Errorf("no GPUs: %+v", r)
	}
	// A lone app pays nothing: nobody else loses by its presence.
	r = PartialAllocation(gainsOf([]float64{2, 1.5, 1}), 4)
	if r.Alloc[0] != 2 || r.C[0] != 1 {
		t.Errorf("lone app: %+v", r)
	}
}

// bruteCounts finds the best total gain over every count vector.
func bruteCounts(gains [][]float64, capacity, skip int) (float64, []int) {
	n := len(gains)
	best, bestAlloc := math.Inf(-1), make([]int, n)
	alloc := make([]int, n)
	var rec func(i, left int, sum float64)
	rec = func(i, left int, sum float64) {
		if i == n {
			if sum > best {
				best = sum
				copy(bestAlloc, alloc)
			}
			return
		}
		alloc[i] = 0
		rec(i+1, left, sum)
		if i == skip {
			return
		}
		for k := 1; k < len(gains[i]) && k <= left; k++ {
			if !math.IsInf(gains[i][k], -1) {
				alloc[i] = k
				rec(i+1, left-k, sum+gains[i][k])
			}
		}
		alloc[i] = 0
	}
	rec(0, capacity, 0)
	return best, bestAlloc
}

func randomGains(rng *rand.Rand, n, kmax int) [][]float64 {
	g := make([][]float64, n)
	for i := range g {
		g[i] = make([]float64, 1+rng.IntN(kmax+1))
		for k := 1; k < len(g[i]); k++ {
			if rng.IntN(4) == 0 {
				g[i][k] = math.Inf(-1)
			} else {
				g[i][k] = 3 * rng.Float64()
			}
		}
	}
	return g
}

// TestPABruteForce checks the dynamic programme against enumeration of
// every count vector: the optimum, each leave-one-out optimum, the
// allocation's value and capacity, and c_i in (0, 1].
func TestPABruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(5)
		capacity := rng.IntN(11)
		gains := randomGains(rng, n, 8)
		r := PartialAllocation(gains, capacity)
		opt, _ := bruteCounts(gains, capacity, -1)
		if !near(r.Objective, opt) {
			t.Fatalf("trial %d: objective %v, brute force %v (gains %v, capacity %d)", trial, r.Objective, opt, gains, capacity)
		}
		sum, used := 0.0, 0
		for i, k := range r.Alloc {
			used += k
			if k > 0 {
				sum += gains[i][k]
			}
		}
		if used > capacity || !near(sum, opt) {
			t.Fatalf("trial %d: allocation %v uses %d of %d GPUs for gain %v, optimum %v", trial, r.Alloc, used, capacity, sum, opt)
		}
		for i := range gains {
			w, _ := bruteCounts(gains, capacity, i)
			if !near(r.Without[i], w) {
				t.Fatalf("trial %d: without %d: %v, brute force %v", trial, i, r.Without[i], w)
			}
			gi := 0.0
			if r.Alloc[i] > 0 {
				gi = gains[i][r.Alloc[i]]
			}
			if want := math.Exp(opt - gi - w); !near(r.C[i], math.Min(1, want)) {
				t.Fatalf("trial %d: c_%d = %v, want %v", trial, i, r.C[i], want)
			}
			if !(r.C[i] > 0 && r.C[i] <= 1) {
				t.Fatalf("trial %d: c_%d = %v outside (0, 1]", trial, i, r.C[i])
			}
			if r.Alloc[i] == 0 && !near(r.C[i], 1) {
				t.Fatalf("trial %d: app %d wins nothing but c = %v", trial, i, r.C[i])
			}
		}
	}
}

// FuzzPartialAllocation decodes bytes into a small auction (apps, GPUs,
// gains in 1/8 steps, some counts refused) and checks the programme against
// enumeration.
func FuzzPartialAllocation(f *testing.F) {
	f.Add([]byte{3, 2, 4, 8, 16, 2, 0xff, 8})
	f.Add([]byte{5, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		capacity := int(data[0] % 9)
		data = data[1:]
		var gains [][]float64
		for len(data) > 0 && len(gains) < 4 {
			n := int(data[0] % 6)
			data = data[1:]
			g := make([]float64, n+1)
			for k := 1; k <= n && len(data) > 0; k++ {
				if data[0] == 0xff {
					g[k] = math.Inf(-1)
				} else {
					g[k] = float64(data[0]) / 8
				}
				data = data[1:]
			}
			gains = append(gains, g)
		}
		r := PartialAllocation(gains, capacity)
		opt, _ := bruteCounts(gains, capacity, -1)
		if !near(r.Objective, opt) {
			t.Fatalf("objective %v, brute force %v", r.Objective, opt)
		}
		used := 0
		for i, k := range r.Alloc {
			used += k
			w, _ := bruteCounts(gains, capacity, i)
			if !near(r.Without[i], w) || !(r.C[i] > 0 && r.C[i] <= 1) {
				t.Fatalf("app %d: without %v (brute force %v), c %v", i, r.Without[i], w, r.C[i])
			}
		}
		if used > capacity {
			t.Fatalf("allocation %v over %d GPUs", r.Alloc, capacity)
		}
	})
}
