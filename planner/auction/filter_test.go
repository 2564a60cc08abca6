package auction

import (
	"math"
	"slices"
	"testing"
)

// filterApps are a 1-minute job that has waited 10 minutes and a sweep of
// 64 one-GPU hour-long jobs that just arrived, on 64 GPUs with N_avg 2.
func filterApps() []App {
	tiny := App{ID: "tiny", Elapsed: 600, NAvg: 2,
		Jobs: []Job{{ID: "tiny/0", IterTime: 1, ItersLeft: 60, ItersTotal: 60, Demand: 1, Gang: 1}}}
	sweep := App{ID: "sweep", NAvg: 2}
	for j := range 64 {
		sweep.Jobs = append(sweep.Jobs, Job{ID: "sweep/" + string(rune('a'+j%26)) + string(rune('a'+j/26)),
			IterTime: 1, ItersLeft: 3600, ItersTotal: 3600, Demand: 1, Gang: 1})
	}
	return []App{tiny, sweep}
}

// CurrentRho compares apps by their fair share, not by the fewest GPUs
// they can run on: ρ_old ranks the fresh sweep first (64 hours on one GPU),
// CurrentRho the job that has waited ten times its length.
func TestCurrentRho(t *testing.T) {
	env := Env{ClusterGPUs: 64, Lease: 600}
	apps := filterApps()
	tiny, sweep := &apps[0], &apps[1]
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		// T_id = 60 x 2 = 120 s; T_sh = 600 + 60 on one GPU, plus a lease.
		{"tiny ρ_now", tiny.CurrentRho(env), (600 + 60 + 600) / 120.0},
		{"tiny ρ_old", tiny.RhoWait(env), (600 + 60 + 600) / 120.0},
		// T_id = 64 x 3600 / 64 x 2 = 7200 s; the fair share is 32 GPUs,
		// two waves of an hour.
		{"sweep ρ_now", sweep.CurrentRho(env), (7200 + 600) / 7200.0},
		// ρ_old runs the 64 jobs one after another on one GPU.
		{"sweep ρ_old", sweep.RhoWait(env), (64*3600 + 600) / 7200.0},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Nothing queued: ρ with what it holds, as RhoWait.
	done := App{ID: "held", NAvg: 1, Jobs: []Job{{ID: "held/0", IterTime: 1, ItersLeft: 100, ItersTotal: 200, Demand: 2, Gang: 2, Held: 2}}}
	if a, b := done.CurrentRho(env), done.RhoWait(env); a != b {
		t.Errorf("held app: CurrentRho %v != RhoWait %v", a, b)
	}
	// A gang larger than the cluster never runs.
	huge := App{ID: "huge", NAvg: 1, Jobs: []Job{{ID: "huge/0", IterTime: 1, ItersLeft: 1, ItersTotal: 1, Demand: 128, Gang: 128}}}
	if r := huge.CurrentRho(env); !math.IsInf(r, 1) {
		t.Errorf("huge gang: CurrentRho = %v, want +Inf", r)
	}
}

// Round-by-round filtering sorts on CurrentRho: with one bidder allowed,
// the long-waiting short job bids and the sweep gets the leftovers.
func TestRoundFiltersOnCurrentRho(t *testing.T) {
	res, err := Round(RoundInput{Apps: filterApps(), Offer: offerOf([]int{8, 8}), Env: Env{ClusterGPUs: 64, Lease: 600}, Fairness: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Participants, []string{"tiny"}) {
		t.Fatalf("participants = %v, want [tiny]", res.Participants)
	}
	// The sweep takes 13 of the other 15: 5 waves of jobs either way.
	if len(res.Awards) != 2 || res.Awards[0].App != "tiny" || res.Awards[0].GPUs != 1 || !res.Awards[0].Auction ||
		res.Awards[1].App != "sweep" || res.Awards[1].GPUs != 13 || res.Awards[1].Auction {
		t.Errorf("awards = %+v, want tiny 1 GPU by auction, sweep 13 as leftovers", res.Awards)
	}
}

// The filter's estimate does not depend on reported placement slowdowns:
// an app cannot get into more rounds by overstating them.
func TestCurrentRhoIgnoresSlowdowns(t *testing.T) {
	env := Env{ClusterGPUs: 64, Lease: 600}
	mk := func(sens Sensitivity) App {
		return App{ID: "a", Elapsed: 1000, NAvg: 4, Sens: sens, Jobs: []Job{
			{ID: "a/0", IterTime: 8, ItersLeft: 500, ItersTotal: 900, Demand: 8, Gang: 8},
			{ID: "a/1", IterTime: 8, ItersLeft: 900, ItersTotal: 900, Demand: 8, Gang: 8}}}
	}
	truthful, liar := mk(Sensitivity{1, 1.2, 1.4}), mk(Sensitivity{1, 1.4, 1.8})
	if a, b := truthful.CurrentRho(env), liar.CurrentRho(env); a != b {
		t.Errorf("CurrentRho: truthful %v, overstating %v; want equal", a, b)
	}
	if a, b := truthful.RhoWait(env), liar.RhoWait(env); !(b > a) {
		t.Errorf("RhoWait: truthful %v, overstating %v; want the overstated one larger (it is the bid's ρ_old)", a, b)
	}
}
