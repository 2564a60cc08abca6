package auction

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

// TestRoundIncumbentKeepsItsGang: a job whose lease ended keeps the gang
// it ran on when its app does not bid and the auction leaves the gang
// whole, whatever the leftover draw; its app's other queued job still
// draws from what is left.
func TestRoundIncumbentKeepsItsGang(t *testing.T) {
	env := Env{ClusterGPUs: 14, Lease: DefaultLease}
	o := offerOf([]int{4, 4, 4, 2})
	newcomer := gangApp("new", 4, DefaultSensitivity, 5000) // worst ρ: bids
	old := gangApp("old", 4, DefaultSensitivity, 10)
	old.Jobs[0].Own = o.Machines[2].Free
	old.Jobs = append(old.Jobs, Job{ID: "old/k", IterTime: 1, ItersLeft: 100, ItersTotal: 100, Demand: 2, Gang: 2})
	other := gangApp("other", 4, DefaultSensitivity, 10)
	for seed := uint64(0); seed < 20; seed++ {
		r, err := Round(RoundInput{Apps: []App{newcomer, old, other}, Offer: o, Env: env, Fairness: DefaultFairness, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Participants, []string{"new"}) {
			t.Fatalf("participants %v, want [new]", r.Participants)
		}
		got := map[string][]JobGrant{}
		for _, a := range r.Awards {
			if a.App == "old" && a.Auction {
				t.Fatalf("seed %d: old won in the auction: %+v", seed, a)
			}
			got[a.App] = append(got[a.App], a.Jobs...)
		}
		want := []JobGrant{{Job: "old/j", GPUs: o.Machines[2].Free}, {Job: "old/k", GPUs: o.Machines[3].Free}}
		if !reflect.DeepEqual(got["old"], want) {
			t.Fatalf("seed %d: old got %+v, want its own gang and the 2-GPU machine", seed, got["old"])
		}
		if len(got["new"]) != 1 || len(got["other"]) != 1 || len(r.Idle) != 0 {
			t.Fatalf("seed %d: new %+v, other %+v, idle %v", seed, got["new"], got["other"], r.Idle)
		}
	}
	// A gang the auction took part of is not kept: old draws like the rest.
	old.Jobs[0].Own = append(slices.Clone(o.Machines[0].Free[:2]), o.Machines[2].Free[:2]...)
	r, err := Round(RoundInput{Apps: []App{newcomer, old, other}, Offer: offerOf([]int{4, 4}), Env: Env{ClusterGPUs: 8, Lease: DefaultLease}, Fairness: DefaultFairness})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Awards {
		for _, jg := range a.Jobs {
			if a.App == "old" && jg.Job == "old/j" && reflect.DeepEqual(jg.GPUs, old.Jobs[0].Own) {
				t.Fatalf("old kept GPUs that were not all offered: %+v", a)
			}
		}
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

// TestRoundProperty runs random rounds, some queued jobs with the gang
// their lease ran on (Job.Own, now and then of a size the job cannot use),
// and checks: GPUs are offered ones, handed out once, gangs whole, each job
// at most one gang; only participants win the auction, one award each;
// the others get leftovers: first each whole own gang the auction left (and
// nothing else in that award), then at most one drawn award; winners hold
// c_i of the lease; and no GPU stays idle that an app without an award
// could use (work conservation).
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
		var pile []string
		for _, m := range o.Machines {
			pile = append(pile, m.Free...)
		}
		rng.Shuffle(len(pile), func(i, j int) { pile[i], pile[j] = pile[j], pile[i] })
		for i := range apps {
			for k := range apps[i].Jobs {
				j := &apps[i].Jobs[k]
				n := j.gang() + rng.IntN(j.Demand-j.gang()+1)
				if rng.IntN(8) == 0 {
					n = j.Demand + 1 // a gang the job cannot run on: not kept
				}
				if j.Held == 0 && rng.IntN(2) == 0 && n <= len(pile) {
					j.Own, pile = pile[:n:n], pile[n:]
				}
			}
		}
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
		jobs := map[string]*Job{}
		for i := range apps {
			for k := range apps[i].Jobs {
				jobs[apps[i].Jobs[k].ID] = &apps[i].Jobs[k]
			}
		}
		// GPUs the auction took, and every job's gang.
		byAuction := map[string]bool{}
		gangOf := map[string][]string{}
		for _, a := range r.Awards {
			for _, jg := range a.Jobs {
				if _, twice := gangOf[jg.Job]; twice {
					t.Fatalf("%s: job %s got two gangs", where, jg.Job)
				}
				gangOf[jg.Job] = jg.GPUs
				if a.Auction {
					for _, g := range jg.GPUs {
						byAuction[g] = true
					}
				}
			}
			if a.Auction {
				for _, g := range a.Spare {
					byAuction[g] = true
				}
			}
		}
		awarded := map[string]bool{}
		drawn := map[string]bool{}
		for _, a := range r.Awards {
			bid := slices.Contains(r.Participants, a.App)
			if a.Auction != bid {
				t.Fatalf("%s: %s auction=%v participant=%v", where, a.App, a.Auction, bid)
			}
			if a.Auction && !near(a.Lease, a.C*env.Lease) || !a.Auction && a.Lease != env.Lease {
				t.Fatalf("%s: %s lease %v, c %v", where, a.App, a.Lease, a.C)
			}
			if !(a.C > 0 && a.C <= 1) {
				t.Fatalf("%s: %+v", where, a)
			}
			own := !a.Auction && len(a.Jobs) > 0 && len(a.Spare) == 0
			for _, jg := range a.Jobs {
				own = own && keepable(jobs[jg.Job]) && slices.Equal(jg.GPUs, jobs[jg.Job].Own)
			}
			switch {
			case own && !awarded[a.App]:
				// The incumbent's own gangs come first and alone.
			case drawn[a.App] || a.Auction && awarded[a.App]:
				t.Fatalf("%s: %s awarded twice", where, a.App)
			default:
				drawn[a.App] = true
				if !(a.Rho < a.Rho0) {
					t.Fatalf("%s: %+v", where, a)
				}
			}
			awarded[a.App] = true
		}
		// A non-bidder's job keeps its own gang whenever the auction left
		// it whole.
		for id, j := range jobs {
			app, _, _ := strings.Cut(id, "/")
			if !keepable(j) || slices.Contains(r.Participants, app) || slices.ContainsFunc(j.Own, func(g string) bool { return byAuction[g] }) {
				continue
			}
			if !slices.Equal(gangOf[id], j.Own) {
				t.Fatalf("%s: job %s got %v, not its own gang %v that the auction left", where, id, gangOf[id], j.Own)
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
