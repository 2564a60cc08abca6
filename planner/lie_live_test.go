package planner

import (
	"fmt"
	"github.com/themis-nomad/themis/planner/plannertest"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/sim"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

// lieApps are the scenario's jobs: app, GPUs, iterations (10 a second).
var lieApps = []struct {
	id, app string
	gpus    int
	iters   int64
}{
	{"s-0", "s", 4, 1200}, {"s-1", "s", 4, 1200}, {"a-0", "a", 8, 1200}, {"b-0", "b", 4, 1200}, {"b-1", "b", 4, 1200},
}

// lieSim runs the scenario in the simulator on the same two 8-GPU nodes
// with the same lease, the liar's agent reporting x times its remaining
// time (themis.lie_remaining; liar "": the truth), and returns each app's
// finish time; unknownUntilRun hides a job's remaining time until it has
// run, as live.
func lieSim(t *testing.T, seed int64, liar string, x float64, unknownUntilRun bool) (map[string]float64, []float64) {
	t.Helper()
	var set []string
	if liar != "" {
		set = append(set, fmt.Sprintf("themis.lie_remaining=%s:%+g%%", liar, 100*(x-1)))
	}
	st := themisStack(t, "20s", lieKnobs(set...)...)
	cl, err := cluster.Mixed("two-nodes", cluster.NodeGroup{Count: 2, GPUsPerNode: 8})
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace.Trace{Name: "lie"}
	for i, j := range lieApps {
		tr.Jobs = append(tr.Jobs, trace.Job{Line: i + 2, ID: j.id, App: j.app, GPUs: j.gpus, Duration: float64(j.iters) / 10, Iterations: int(j.iters), Class: "be"})
	}
	rec := &roundTimes{Policy: st.Policy.(*arbiter.Policy)}
	r, err := sim.Run(sim.Config{Trace: tr, Cluster: cl, Policy: rec, Seed: seed, EqualParts: true, Victims: st.Victims, VictimTie: st.VictimTie,
		UnknownUntilRun: unknownUntilRun})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, a := range r.Apps {
		out[a.ID] = a.End - a.Arrival
	}
	return out, rec.at
}

// roundTimes records when a Themis policy ran its auction rounds, in
// seconds from the first (the simulator's and the live planner's clocks
// both start at the scenario's submissions).
type roundTimes struct {
	*arbiter.Policy
	start time.Time
	at    []float64
}

// Capabilities implements core.Policy: the arbiter's, allocating through
// r.
func (r *roundTimes) Capabilities() core.Capabilities {
	c := r.Policy.Capabilities()
	c.Policy, c.Allocator = r, r
	return c
}

func (r *roundTimes) Allocate(now time.Time, jobs []*core.Job, free *core.FreeGPUs, held []core.Grant) ([]core.Grant, []core.JobKey) {
	g, stop := r.Policy.Allocate(now, jobs, free, held)
	if rep, ok := r.LastRound(); ok && int(rep.Round) > len(r.at) {
		if len(r.at) == 0 {
			r.start = rep.At
		}
		r.at = append(r.at, rep.At.Sub(r.start).Seconds())
	}
	return g, stop
}

// Lying about progress, live (issue #15; the simulator's counterpart is
// Figure 18, docs/themis.md "Strategic lying"). Live, an app's agent knows
// a job's remaining time only from its workload's progress reports
// (themis/progress/<ns>/<job>: iteration, total, and the rate the driver
// measures), so the lie a workload can tell is its total: claiming less
// work left than it has (it looks closer to done), or more (it looks worse
// off), or reporting nothing (the agent's estimate: as long again as it
// has run). The driver measures the rate; the workload cannot fake it.
//
// lieRun drives the planner round by round on two 8-GPU nodes with a 20 s
// lease: apps s (two 4-GPU jobs of 120 s), a (one 8-GPU job of 120 s)
// and b (two 4-GPU jobs of 120 s), 24 GPUs of demand on 16, all submitted
// at once. Each job advances 10 iterations a second while its allocation
// runs (not while it is stopping), keeps its iterations across
// preemptions (checkpoints), and finishes when it has done its total.
// lie is what the liar app's jobs report as their total given the true
// iteration and total (nil: the truth; a negative result: no report).
// It returns each app's finish time (its last job's end, from the common
// submission) and how often each app's jobs were taken back (allocations
// after the first).
func lieRun(t *testing.T, seed int64, liar string, lie func(iter, total int64) int64) (finish map[string]float64, preempted map[string]int, rounds []float64) {
	t.Helper()
	st := lieLiveStack(t, "20s", lieKnobs()...)
	rec := &roundTimes{Policy: st.Policy.(*arbiter.Policy)}
	rec.Seed(seed)
	st.Policy, st.Caps = rec, rec.Capabilities()
	h := newClusterHarness(t, 2, 8, st)
	pr := progressRun{speed: func([]*plannertest.Alloc) float64 { return 10 }, liar: liar, lie: lie, limit: 3000}
	for _, j := range lieApps {
		pr.jobs = append(pr.jobs, &fakeWorkload{id: j.id, app: j.app, tot: j.iters})
		h.Nomad.SubmitApp(j.id, j.gpus, j.app)
	}
	finish, preempted = pr.finishes(pr.run(t, h)), map[string]int{}
	for _, j := range pr.jobs {
		preempted[j.app] += max(0, len(h.Nomad.Allocs[core.JobKey{Namespace: "default", ID: j.id}])-1)
	}
	return finish, preempted, rec.at
}

// lieSeeds are the auction's tie-break seeds the scenario runs with, live
// (the arbiter's seed, recorded in its state) and in the simulator alike:
// at the first round the three apps are identical, so the seed decides
// which two start, and every schedule after depends on it.
var lieSeeds = []int64{0, 1, 2, 3}

// Each app in turn lies, each way; what it gets (its finish time) is
// compared with what it gets when every app tells the truth, live and in
// the simulator, with each seed.
func TestLyingAboutProgressLive(t *testing.T) {
	scale := func(x float64) func(iter, total int64) int64 {
		return func(iter, total int64) int64 {
			return iter + max(1, int64(math.Round(float64(total-iter)*x)))
		}
	}
	cases := []struct {
		name string
		x    float64 // the factor on the remaining time (0: no report)
	}{
		{"remaining -90%", 0.1}, {"remaining -50%", 0.5}, {"remaining +50%", 1.5}, {"remaining +100%", 2}, {"remaining x10", 10},
		{"no report", 0},
	}
	gain := func(truth, lied map[string]float64, liar string) float64 {
		return 100 * (truth[liar] - lied[liar]) / truth[liar]
	}
	type row struct{ live, sim, simU []string }
	rows := map[string]*row{}
	var order []string
	truthRow := &row{}
	worst, worstSimU, excess := math.Inf(-1), math.Inf(-1), math.Inf(-1)
	var excessAt string
	for _, seed := range lieSeeds {
		truth, pre, rounds := lieRun(t, seed, "", nil)
		simTruth, _ := lieSim(t, seed, "", 1, false)
		simTruthU, roundsU := lieSim(t, seed, "", 1, true)
		truthRow.live = append(truthRow.live, fmt.Sprintf("%.0f/%.0f/%.0f (%d/%d/%d)", truth["s"], truth["a"], truth["b"], pre["s"], pre["a"], pre["b"]))
		truthRow.sim = append(truthRow.sim, fmt.Sprintf("%.0f/%.0f/%.0f", simTruth["s"], simTruth["a"], simTruth["b"]))
		truthRow.simU = append(truthRow.simU, fmt.Sprintf("%.0f/%.0f/%.0f", simTruthU["s"], simTruthU["a"], simTruthU["b"]))
		// Live carries out the simulator's auctions: as many rounds, and
		// every app within a few seconds of its simulated finish (each
		// stop costs the live job its 3 s checkpoint and a round).
		t.Logf("seed %d: rounds live %v, sim u %v", seed, rounds, roundsU)
		if len(rounds) < len(roundsU) || !slices.Equal(rounds[:len(roundsU)], roundsU) {
			t.Errorf("seed %d, everyone truthful: auction rounds at %v s live, at %v s in the simulator", seed, rounds, roundsU)
		}
		for _, app := range []string{"s", "a", "b"} {
			if d := truth[app] - simTruthU[app]; d < 0 || d > 4*float64(pre[app]+1)+4 {
				t.Errorf("seed %d, everyone truthful: app %s finishes at %.0f s live, %.0f s in the simulator", seed, app, truth[app], simTruthU[app])
			}
		}
		for _, liar := range []string{"s", "a", "b"} {
			for _, tc := range cases {
				key := tc.name + " | " + liar
				if rows[key] == nil {
					rows[key] = &row{}
					order = append(order, key)
				}
				lie := func(int64, int64) int64 { return -1 }
				if tc.x > 0 {
					lie = scale(tc.x)
				}
				finish, _, _ := lieRun(t, seed, liar, lie)
				g := gain(truth, finish, liar)
				worst = max(worst, g)
				r := rows[key]
				r.live = append(r.live, fmt.Sprintf("%+.1f%%", g))
				if tc.x == 0 {
					// The simulator has no counterpart: the agent's estimate
					// for a job that reports nothing is what it uses for
					// every job before its first report ("sim u").
					r.sim, r.simU = append(r.sim, "—"), append(r.simU, "—")
					if g > 0.5 && g-0 > excess {
						excess, excessAt = g, fmt.Sprintf("seed %d, %s by %s: %+.1f%% live, nothing to gain in the simulator", seed, tc.name, liar, g)
					}
					continue
				}
				sf, _ := lieSim(t, seed, liar, tc.x, false)
				sfu, _ := lieSim(t, seed, liar, tc.x, true)
				gs, gu := gain(simTruth, sf, liar), gain(simTruthU, sfu, liar)
				worstSimU = max(worstSimU, gu)
				r.sim, r.simU = append(r.sim, fmt.Sprintf("%+.1f%%", gs)), append(r.simU, fmt.Sprintf("%+.1f%%", gu))
				if e := g - max(0, gu); e > excess {
					excess, excessAt = e, fmt.Sprintf("seed %d, %s by %s: %+.1f%% live, %+.1f%% in the simulator (sim u)", seed, tc.name, liar, g, gu)
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| liar reports | liar | liar's gain live, seeds %v | sim | sim u |\n|---|---|---|---|---|\n", lieSeeds)
	fmt.Fprintf(&b, "| (truth: finish s/a/b, preemptions) | — | %s | %s | %s |\n", strings.Join(truthRow.live, ", "), strings.Join(truthRow.sim, ", "), strings.Join(truthRow.simU, ", "))
	for _, key := range order {
		r := rows[key]
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", key, strings.Join(r.live, ", "), strings.Join(r.sim, ", "), strings.Join(r.simU, ", "))
	}
	t.Log(b.String())
	t.Logf("best lie: %+.1f%% live, %+.1f%% in the simulator with remaining times unknown until a job runs; most a lie gains live beyond what it gains in the simulator: %+.1f points (%s)",
		worst, worstSimU, excess, excessAt)
	// The bar: a lie gains live nothing it would not gain in the
	// simulator. The slack is the checkpoint and round time a live stop
	// costs (a few seconds on finishes of 120-230 s).
	if excess > 2 {
		t.Errorf("a progress lie gains live %.1f points more than in the simulator: %s", excess, excessAt)
	}
}

// lieLiveStack is the live planner's stack of the lying tests: themis with
// the lease and knobs, trusting every namespace's progress reports, as the
// simulator trusts its workloads' (the tables compare the two), unless
// $THEMIS_LIE_TRUST is "untrusted": then the live planner's default, every
// app ranked by the filter as-run (docs/themis.md, "Whose progress
// counts").
func lieLiveStack(t *testing.T, lease string, set ...string) *stack.Stack {
	t.Helper()
	st := themisStack(t, lease, set...)
	switch v := os.Getenv("THEMIS_LIE_TRUST"); v {
	case "", "trusted":
		trust := hived.NewBinding(hived.AnyNamespace)
		trust.TrustProgress = true
		st.Tenants = &hived.Config{Namespaces: []hived.Binding{trust}}
	case "untrusted":
	default:
		t.Fatalf("THEMIS_LIE_TRUST=%q: want trusted or untrusted", v)
	}
	return st
}

// lieKnobs is the lying tests' knobs: set, plus themis.filter_remaining
// from $THEMIS_LIE_FILTER when it is set (reported, truth or as-run:
// what the filter ranks apps by, live and in the simulator alike;
// docs/themis.md, "Why under-claiming pays").
func lieKnobs(set ...string) []string {
	if v := os.Getenv("THEMIS_LIE_FILTER"); v != "" {
		set = append(set, "themis.filter_remaining="+v)
	}
	return set
}
