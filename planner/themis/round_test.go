package themis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParticipants(t *testing.T) {
	for _, tc := range []struct {
		n    int
		f    float64
		want int
	}{{0, 0.8, 0}, {1, 0.8, 1}, {4, 0.8, 1}, {10, 0.8, 2}, {11, 0.8, 3}, {10, 0, 10}, {10, 1, 1}, {5, 0.5, 3}, {3, 2.0 / 3, 1}} {
		if got := Participants(tc.n, tc.f); got != tc.want {
			t.Errorf("Participants(%d, %v) = %d, want %d", tc.n, tc.f, got, tc.want)
		}
	}
}

// tenApps are single-GPU jobs that have waited 100, 200, ... 1000 s: the
// longer, the worse their ρ.
func tenApps() []App {
	var apps []App
	for i := 1; i <= 10; i++ {
		apps = append(apps, gangApp(fmt.Sprintf("app%02d", i), 1, DefaultSensitivity, float64(100*i)))
	}
	return apps
}

func TestRoundFilterLeaseLeftover(t *testing.T) {
	in := RoundInput{
		Apps:     tenApps(),
		Offer:    offerOf([]int{4, 4}),
		Env:      Env{ClusterGPUs: 8, Lease: DefaultLease},
		Fairness: DefaultFairness,
		Seed:     1,
	}
	r, err := Round(in)
	if err != nil {
		t.Fatal(err)
	}
	// The 20% with the worst ρ bid: the two that waited longest.
	if !slices.Equal(r.Participants, []string{"app10", "app09"}) {
		t.Fatalf("participants %v, want [app10 app09]", r.Participants)
	}
	for i := 1; i < 10; i++ {
		if !(r.Rho[fmt.Sprintf("app%02d", i)] < r.Rho[fmt.Sprintf("app%02d", i+1)]) {
			t.Fatalf("ρ does not grow with waiting: %v", r.Rho)
		}
	}
	got := map[string]Award{}
	for _, a := range r.Awards {
		got[a.App] = a
	}
	for _, id := range r.Participants {
		a := got[id]
		// Eight GPUs, two one-GPU bidders: nobody's presence hurts the
		// other, so c = 1 and the lease is whole.
		if !a.Auction || a.GPUs != 1 || a.C != 1 || a.Lease != DefaultLease {
			t.Errorf("%s: %+v", id, a)
		}
	}
	// Work conservation: the 6 GPUs left go to 6 of the 8 others at
	// random, for the whole lease.
	leftover := 0
	for _, a := range r.Awards {
		if a.Auction {
			continue
		}
		leftover++
		if slices.Contains(r.Participants, a.App) || a.GPUs != 1 || a.Lease != DefaultLease || a.C != 1 {
			t.Errorf("leftover %+v", a)
		}
	}
	if leftover != 6 || len(r.Idle) != 0 {
		t.Errorf("%d leftover grants, idle %v; want 6 and none", leftover, r.Idle)
	}
	// Same seed, same round; other seeds draw other apps.
	again, _ := Round(in)
	if !reflect.DeepEqual(r, again) {
		t.Errorf("the same round decided twice differs")
	}
	draws := map[string]bool{}
	for seed := uint64(0); seed < 20; seed++ {
		in.Seed = seed
		r, _ := Round(in)
		var who []string
		for _, a := range r.Awards {
			if !a.Auction {
				who = append(who, a.App)
			}
		}
		slices.Sort(who)
		draws[strings.Join(who, ",")] = true
	}
	if len(draws) < 2 {
		t.Errorf("20 seeds drew the same leftover apps: %v", draws)
	}
}

// TestRoundHiddenPayment: three apps bid for four GPUs on one machine;
// the proportional-fair allocation serves A and B, and the lease each gets
// is c_i of the round's: A's presence costs C its GPUs, so A holds them for
// half of it (TestPAHandThreeGangs's numbers).
func TestRoundHiddenPayment(t *testing.T) {
	env := Env{ClusterGPUs: 8, Lease: 600}
	mk := func(id string, gang int, ratio float64) App {
		// Work and waiting chosen so that ρ(gang GPUs on one machine) = 1
		// and ρ_old = ratio: with S = 5 when spread, ρ_old - ρ = (4 W /
		// gang + lease) / T_id.
		a := gangApp(id, gang, Sensitivity{1, 5, 5}, 0)
		a.NAvg = 1
		a.Jobs[0].ItersTotal = 1e5
		tid := a.IdealTime(env.ClusterGPUs)
		w := ((ratio-1)*tid - env.Lease) * float64(gang) / 4
		a.Jobs[0].ItersLeft = w
		a.Elapsed = tid - w/float64(gang)
		return a
	}
	apps := []App{mk("A", 2, 3), mk("B", 2, 2), mk("C", 3, 4)}
	for _, a := range apps {
		v, err := Bid(&a, env)
		if err != nil {
			t.Fatal(err)
		}
		if !near(v.Rho0/v.Rho(a.Jobs[0].Gang, SameMachine), map[string]float64{"A": 3, "B": 2, "C": 4}[a.ID]) {
			t.Fatalf("%s: ρ_old %v, ρ %v", a.ID, v.Rho0, v.Rho(a.Jobs[0].Gang, SameMachine))
		}
	}
	r, err := Round(RoundInput{Apps: apps, Offer: offerOf([]int{4}), Env: env, Fairness: 0})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"A": 300, "B": 450}
	if len(r.Awards) != 2 {
		t.Fatalf("awards %+v", r.Awards)
	}
	for _, a := range r.Awards {
		if !near(a.Lease, want[a.App]) || a.GPUs != 2 {
			t.Errorf("%s: %d GPUs for %v s, want 2 for %v", a.App, a.GPUs, a.Lease, want[a.App])
		}
	}
}

// TestRoundProperty runs random rounds and checks: GPUs are offered ones,
// handed out once, gangs whole; each app gets at most one award; only
// participants win the auction, only the others get leftovers; winners
// hold c_i of the lease; and no GPU stays idle that an app without an
// award could use (work conservation).
func TestRoundProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	cache := NewBidCache()
	for trial := 0; trial < 300; trial++ {
		env := Env{ClusterGPUs: 32, Lease: 600}
		var apps []App
		for i := 0; i < 1+rng.IntN(12); i++ {
			apps = append(apps, randomApp(rng, fmt.Sprintf("t%d-a%d", trial%3, i), env.ClusterGPUs))
		}
		var layout [][]int
		for r := 0; r < 1+rng.IntN(3); r++ {
			var ms []int
			for m := 0; m < 1+rng.IntN(3); m++ {
				ms = append(ms, rng.IntN(9))
			}
			layout = append(layout, ms)
		}
		o := offerOf(layout...)
		f := []float64{0, 0.5, 0.8, 1}[rng.IntN(4)]
		r, err := Round(RoundInput{Apps: apps, Offer: o, Env: env, Fairness: f, Seed: uint64(trial), Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		where := fmt.Sprintf("trial %d", trial)
		bs := make([]Bidder, len(apps))
		for i := range apps {
			v, _ := Bid(&apps[i], env)
			bs[i] = Bidder{&apps[i], v}
		}
		checkAwards(t, where, o, bs, r.Awards, r.Idle)
		awarded := map[string]bool{}
		for _, a := range r.Awards {
			if awarded[a.App] {
				t.Fatalf("%s: %s awarded twice", where, a.App)
			}
			awarded[a.App] = true
			bid := slices.Contains(r.Participants, a.App)
			if a.Auction != bid {
				t.Fatalf("%s: %s auction=%v participant=%v", where, a.App, a.Auction, bid)
			}
			if a.Auction && !near(a.Lease, a.C*env.Lease) || !a.Auction && a.Lease != env.Lease {
				t.Fatalf("%s: %s lease %v, c %v", where, a.App, a.Lease, a.C)
			}
			if !(a.C > 0 && a.C <= 1) || !(a.Rho < a.Rho0) {
				t.Fatalf("%s: %+v", where, a)
			}
		}
		idle := newPool(restrict(o, r.Idle))
		for _, b := range bs {
			if awarded[b.Val.App] || slices.Contains(r.Participants, b.Val.App) {
				continue
			}
			if g, _ := offerGains(b.Val, idle.caps()); usable(g) {
				t.Fatalf("%s: %s could use idle GPUs %v", where, b.Val.App, r.Idle)
			}
		}
	}
	if cache.Len() == 0 || cache.Len() > 36 {
		t.Errorf("cache holds %d bids", cache.Len())
	}
}

// restrict keeps the offer's GPUs in keep.
func restrict(o Offer, keep []string) Offer {
	in := map[string]bool{}
	for _, g := range keep {
		in[g] = true
	}
	var out Offer
	for _, m := range o.Machines {
		var free []string
		for _, g := range m.Free {
			if in[g] {
				free = append(free, g)
			}
		}
		out.Machines = append(out.Machines, Machine{ID: m.ID, Rack: m.Rack, Free: free})
	}
	return out
}

func TestRoundErrors(t *testing.T) {
	ok := RoundInput{Apps: tenApps(), Offer: offerOf([]int{2}), Env: Env{ClusterGPUs: 8, Lease: 600}, Fairness: 0.8}
	cases := []struct {
		name string
		mod  func(*RoundInput)
		want string
	}{
		{"fairness above 1", func(in *RoundInput) { in.Fairness = 1.5 }, "fairness"},
		{"fairness NaN", func(in *RoundInput) { in.Fairness = math.NaN() }, "fairness"},
		{"no lease", func(in *RoundInput) { in.Env.Lease = 0 }, "lease"},
		{"no cluster", func(in *RoundInput) { in.Env.ClusterGPUs = 0 }, "cluster"},
		{"duplicate app", func(in *RoundInput) { in.Apps[1].ID = in.Apps[0].ID }, "twice"},
		{"invalid app", func(in *RoundInput) { in.Apps[2].Jobs[0].Demand = 0 }, "demand"},
		{"duplicate GPU", func(in *RoundInput) { in.Offer.Machines[0].Free[1] = in.Offer.Machines[0].Free[0] }, "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := ok
			in.Apps = tenApps()
			in.Offer = offerOf([]int{2})
			tc.mod(&in)
			if _, err := Round(in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Round() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Round(ok); err != nil {
		t.Errorf("valid round: %v", err)
	}
}
