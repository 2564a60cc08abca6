package auction

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func gpuIDs(machine string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-g%d", machine, i)
	}
	return out
}

func offerOf(layout ...[]int) Offer {
	var o Offer
	for r, ms := range layout {
		for m, n := range ms {
			id := fmt.Sprintf("r%dm%d", r, m)
			o.Machines = append(o.Machines, Machine{ID: id, Rack: fmt.Sprintf("r%d", r), Free: gpuIDs(id, n)})
		}
	}
	return o
}

func gangApp(id string, gpus int, sens Sensitivity, elapsed float64) App {
	return App{ID: id, Elapsed: elapsed, NAvg: 2, Sens: sens, Jobs: []Job{{ID: id + "/j", IterTime: 1, ItersLeft: 4000, ItersTotal: 8000, Demand: gpus, Gang: gpus}}}
}

// TestAuctionPlacementPreference is Figure 5's Instance 2: an insensitive
// app (Inception-v3) and a placement-sensitive one (VGG16), each one job of
// 4 tasks, on a 4-GPU machine and two 2-GPU machines. Both get 4 GPUs; the
// sensitive app gets the 4-GPU machine (the allocation that is envy-free
// and Pareto-efficient), the insensitive one the two small machines.
func TestAuctionPlacementPreference(t *testing.T) {
	env := Env{ClusterGPUs: 8, Lease: 600}
	inception := gangApp("inception", 4, Sensitivity{1, 1, 1}, 1000)
	vgg := gangApp("vgg", 4, Sensitivity{1, 1.29, 1.5}, 1000)
	var bidders []Bidder
	for _, a := range []*App{&inception, &vgg} {
		v, err := Bid(a, env)
		if err != nil {
			t.Fatal(err)
		}
		bidders = append(bidders, Bidder{a, v})
	}
	r, err := Auction(bidders, offerOf([]int{4, 2, 2}))
	if err != nil {
		t.Fatal(err)
	}
	in, vg := r.Awards[0], r.Awards[1]
	if in.GPUs != 4 || vg.GPUs != 4 {
		t.Fatalf("awards %+v", r.Awards)
	}
	if vg.Placed != SameMachine || vg.Jobs[0].GPUs[0] != "r0m0-g0" {
		t.Errorf("VGG placed %s on %v, want the 4-GPU machine", vg.Placed, vg.AllGPUs())
	}
	if in.Class != CrossRack || in.Placed != SameRack {
		t.Errorf("Inception bid %s placed %s, want cross-rack (it does not care) placed in the rack", in.Class, in.Placed)
	}
	if len(r.Left) != 0 {
		t.Errorf("left %v", r.Left)
	}
}

// trueValue is the brute-force objective of one concrete assignment of
// GPUs to apps (owner -1: nobody), or -Inf when an app gets GPUs it cannot
// use.
func trueValue(o Offer, vals []*Valuation, owner []int) float64 {
	type spot struct{ machine, rack string }
	var spots []spot
	for _, m := range o.Machines {
		for range m.Free {
			spots = append(spots, spot{m.ID, m.Rack})
		}
	}
	sum := 0.0
	for i, v := range vals {
		k := 0
		machines, racks := map[string]bool{}, map[string]bool{}
		for g, w := range owner {
			if w == i {
				k++
				machines[spots[g].machine] = true
				racks[spots[g].rack] = true
			}
		}
		if k == 0 {
			continue
		}
		c := SameMachine
		if len(racks) > 1 {
			c = CrossRack
		} else if len(machines) > 1 {
			c = SameRack
		}
		r := v.Rho(k, c)
		if math.IsInf(r, 1) {
			return math.Inf(-1)
		}
		sum += math.Log(v.Rho0 / r)
	}
	return sum
}

// bruteGPUs is the best objective over every assignment of the offer's
// GPUs to apps.
func bruteGPUs(o Offer, vals []*Valuation) float64 {
	n := o.GPUs()
	owner := make([]int, n)
	best := math.Inf(-1)
	var rec func(g int)
	rec = func(g int) {
		if g == n {
			best = math.Max(best, trueValue(o, vals, owner))
			return
		}
		for w := -1; w < len(vals); w++ {
			owner[g] = w
			rec(g + 1)
		}
	}
	rec(0)
	return best
}

func randomOffer(rng *rand.Rand, maxGPUs int) Offer {
	var layout [][]int
	total := 0
	for r := 0; r < 1+rng.IntN(2); r++ {
		var ms []int
		for m := 0; m < 1+rng.IntN(3) && total < maxGPUs; m++ {
			n := 1 + rng.IntN(min(4, maxGPUs-total))
			ms = append(ms, n)
			total += n
		}
		if len(ms) > 0 {
			layout = append(layout, ms)
		}
	}
	return offerOf(layout...)
}

func randomBidders(t *testing.T, rng *rand.Rand, n int, env Env) []Bidder {
	t.Helper()
	var bs []Bidder
	for i := 0; i < n; i++ {
		a := randomApp(rng, fmt.Sprintf("app%d", i), env.ClusterGPUs)
		v, err := Bid(&a, env)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, Bidder{&a, v})
	}
	return bs
}

// TestAuctionBruteForce compares the auction with every assignment of GPUs
// to apps on small offers. The counts-and-classes programme never does
// worse than the best concrete assignment (it relaxes which machines the
// apps share), and when placement repair gives every winner the class it
// bid for, the repaired GPUs are a concrete assignment reaching that
// optimum: the two are equal. Repair must also hand out only offered GPUs,
// each once, every gang whole.
func TestAuctionBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	env := Env{ClusterGPUs: 12, Lease: 600}
	trials, exact := 400, 0
	if testing.Short() {
		trials = 100
	}
	for trial := 0; trial < trials; trial++ {
		o := randomOffer(rng, 7)
		bs := randomBidders(t, rng, 1+rng.IntN(3), env)
		vals := make([]*Valuation, len(bs))
		for i := range bs {
			vals[i] = bs[i].Val
		}
		r, err := Auction(bs, o)
		if err != nil {
			t.Fatal(err)
		}
		truth := bruteGPUs(o, vals)
		if r.PA.Objective < truth-1e-9 {
			t.Fatalf("trial %d: auction objective %v below the best assignment %v", trial, r.PA.Objective, truth)
		}
		checkAwards(t, fmt.Sprintf("trial %d", trial), o, bs, r.Awards, r.Left)
		realized, asBid := 0.0, len(r.Dropped) == 0
		for i, a := range r.Awards {
			if r.PA.Alloc[i] == 0 {
				continue
			}
			if a.Placed > a.Class || a.GPUs != r.PA.Alloc[i] {
				asBid = false
			}
			if a.GPUs > 0 {
				realized += math.Log(a.Rho0 / a.Rho)
			}
		}
		if realized > truth+1e-9 {
			t.Fatalf("trial %d: repaired GPUs worth %v, above the best assignment %v", trial, realized, truth)
		}
		if asBid {
			exact++
			if !near(r.PA.Objective, truth) {
				t.Fatalf("trial %d: placed as bid yet objective %v != best assignment %v", trial, r.PA.Objective, truth)
			}
		}
	}
	t.Logf("%d of %d auctions placed as bid (the objective equals the GPU-level optimum)", exact, trials)
	if exact < trials*85/100 {
		t.Errorf("only %d of %d auctions placed as bid", exact, trials)
	}
}

// TestAuctionOneMachineExact: on one machine every allocation is
// machine-local, the relaxation is exact, and repair never falls back.
func TestAuctionOneMachineExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	env := Env{ClusterGPUs: 8, Lease: 600}
	for trial := 0; trial < 200; trial++ {
		o := offerOf([]int{1 + rng.IntN(6)})
		bs := randomBidders(t, rng, 1+rng.IntN(3), env)
		vals := make([]*Valuation, len(bs))
		for i := range bs {
			vals[i] = bs[i].Val
		}
		r, err := Auction(bs, o)
		if err != nil {
			t.Fatal(err)
		}
		if truth := bruteGPUs(o, vals); !near(r.PA.Objective, truth) {
			t.Fatalf("trial %d: objective %v, best assignment %v", trial, r.PA.Objective, truth)
		}
		if len(r.Dropped) > 0 {
			t.Fatalf("trial %d: dropped %v on one machine", trial, r.Dropped)
		}
		for i, a := range r.Awards {
			if r.PA.Alloc[i] > 0 && a.Placed != SameMachine {
				t.Fatalf("trial %d: %s placed %s", trial, a.App, a.Placed)
			}
		}
	}
}

// checkAwards: GPUs offered, each handed out once, none also left over,
// one whole gang per job within its demand, only to queued jobs.
func checkAwards(t *testing.T, where string, o Offer, bs []Bidder, awards []Award, left []string) {
	t.Helper()
	offered := map[string]bool{}
	for _, m := range o.Machines {
		for _, g := range m.Free {
			offered[g] = true
		}
	}
	apps := map[string]*App{}
	for _, b := range bs {
		apps[b.Val.App] = b.App
	}
	taken := map[string]string{}
	for _, a := range awards {
		n := 0
		for _, jg := range a.Jobs {
			for _, g := range jg.GPUs {
				if !offered[g] {
					t.Fatalf("%s: %s got GPU %s that was not offered", where, a.App, g)
				}
				if who, dup := taken[g]; dup {
					t.Fatalf("%s: GPU %s to %s and %s", where, g, who, a.App)
				}
				taken[g] = a.App
				n++
			}
			app := apps[a.App]
			if app == nil {
				continue
			}
			var job *Job
			for i := range app.Jobs {
				if app.Jobs[i].ID == jg.Job {
					job = &app.Jobs[i]
				}
			}
			if job == nil || job.Held != 0 || len(jg.GPUs) < job.gang() || len(jg.GPUs) > job.Demand {
				t.Fatalf("%s: %s: grant %v breaks job %+v", where, a.App, jg, job)
			}
		}
		for _, g := range a.Spare {
			if !offered[g] {
				t.Fatalf("%s: %s got spare GPU %s that was not offered", where, a.App, g)
			}
			if who, dup := taken[g]; dup {
				t.Fatalf("%s: GPU %s to %s and %s", where, g, who, a.App)
			}
			taken[g] = a.App
			n++
		}
		if n != a.GPUs {
			t.Fatalf("%s: %s: award of %d GPUs lists %d", where, a.App, a.GPUs, n)
		}
	}
	for _, g := range left {
		if who, ok := taken[g]; ok {
			t.Fatalf("%s: GPU %s both left and given to %s", where, g, who)
		}
		taken[g] = ""
	}
	if len(taken) != len(offered) {
		t.Fatalf("%s: %d GPUs offered, %d accounted for", where, len(offered), len(taken))
	}
}
