package arbiter

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// The horizon's promise with jobs waiting (SteadyUntil after a round that
// had nothing to offer), on random scenes: a full cluster of running jobs
// with leases ending at random, some reporting progress, and newcomer apps
// waiting; a contention history in which N_avg is above or below the apps
// active now. At any time before the horizon, with the running jobs
// progressing as the live planner accounts them (their remaining time
// falls, their executed time grows), deciding again acts on nothing. Past
// it, the test looks for the first decision that acts before the first
// lease end, to show the early-end path is reached and how near the
// horizon comes to it.
func TestEarlyEndHorizonHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 11))
	var quiet, horizons, calmBound, endedEarly int
	var ratios []float64
	for trial := range 4000 {
		sc := randomScene(rng)
		p := sc.p
		t0 := sc.t0
		s := decide(t, p, sc.nodes, sc.jobs, sc.held, t0)
		if len(s.grants)+len(s.preempts) > 0 {
			continue // the scene acts at once: nothing to hold
		}
		quiet++
		until := p.SteadyUntil(at(t0), ptrs(sc.jobs))
		first := sc.firstLeaseEnd()
		if until.After(first) {
			t.Fatalf("trial %d: horizon %s after the first lease end %s", trial, until, first)
		}
		if !until.After(at(t0)) {
			continue
		}
		horizons++
		h := until.Sub(at(t0)).Seconds()
		// Before the horizon: nothing acts.
		var ts []float64
		for range 20 {
			ts = append(ts, t0+rng.Float64()*h)
		}
		slices.Sort(ts)
		for _, tt := range ts {
			if s := decide(t, p, sc.nodes, sc.at(tt), sc.held, tt); len(s.grants)+len(s.preempts) > 0 {
				t.Fatalf("trial %d: the decision at t0+%.3fs acted (%+v), before the horizon t0+%.3fs\n%s", trial, tt-t0, s, h, sc.describe())
			}
		}
		// Past it: the first decision that acts before the first lease
		// ends (an early end), in steps of a hundredth of the lease.
		end := first.Sub(at(0)).Seconds() - 0.002 // a lease over then is no early end
		if t0+h < end {
			calmBound++
		}
		for tt := t0 + h; tt < end; tt += p.Lease / 100 {
			if s := decide(t, p, sc.nodes, sc.at(tt), sc.held, tt); len(s.grants)+len(s.preempts) > 0 {
				endedEarly++
				ratios = append(ratios, h/(tt-t0))
				break
			}
		}
	}
	slices.Sort(ratios)
	med := 0.0
	if len(ratios) > 0 {
		med = ratios[len(ratios)/2]
	}
	t.Logf("%d quiet scenes, %d with a horizon after now (%d before the first lease end), %d ended a lease early after it (horizon / time to the early end: median %.2f)",
		quiet, horizons, calmBound, endedEarly, med)
	if horizons < 50 || endedEarly < 5 {
		t.Errorf("too few horizons (%d) or early ends after them (%d): the scenes do not exercise the rule", horizons, endedEarly)
	}
}

// scene is a random cluster for TestEarlyEndHorizonHolds.
type scene struct {
	p     *Policy
	t0    float64
	nodes []core.Node
	jobs  []core.Job // at t0
	held  []core.Grant
	// slow is each running job's placement slowdown as the live planner
	// measures it: its remaining time falls by 1/slow a second.
	slow []float64
}

func ptrs(js []core.Job) []*core.Job {
	out := make([]*core.Job, len(js))
	for i := range js {
		out[i] = &js[i]
	}
	return out
}

// at is the scene's jobs at time tt >= t0, as the live planner accounts
// them (planner/account.go withProgress): a running job has run tt - t0
// more, and one that reports progress has that over its slowdown less
// left (never below 0); a waiting job is as it was.
func (sc *scene) at(tt float64) []core.Job {
	dt := tt - sc.t0
	out := slices.Clone(sc.jobs)
	for i := range out {
		j := &out[i]
		if j.Phase != core.Granted {
			continue
		}
		j.Executed += dt
		j.Attained += dt * float64(j.GPUs)
		if j.Remaining >= 0 {
			j.Remaining = max(0, j.Remaining-dt/sc.slow[i])
		}
	}
	return out
}

func (sc *scene) firstLeaseEnd() time.Time {
	var first time.Time
	for _, e := range sc.p.leases {
		if first.IsZero() || e.Before(first) {
			first = e
		}
	}
	return first
}

func (sc *scene) describe() string {
	s := fmt.Sprintf("t0=%.1f lease=%.0f rho=%.2f contention=%+v\n", sc.t0, sc.p.Lease, sc.p.EarlyEndRho, sc.p.cont.State())
	for _, j := range sc.jobs {
		s += fmt.Sprintf("  %s app=%s gpus=%d %s remaining=%.1f work=%.1f executed=%.1f first=%.1f lease=%s\n", j.Key.ID, j.App, j.GPUs, j.Phase,
			j.Remaining, j.Work, j.Executed, sc.p.first[j.App], sc.p.leases[j.Key].Sub(at(0)))
	}
	return s
}

// randomScene builds a full cluster of 2-5 nodes of 8 GPUs, its running
// jobs' apps arrived over the last three leases and its newcomers over the
// last one, with apps that came and went in between (N_avg off the apps
// active now, either way).
func randomScene(rng *rand.Rand) *scene {
	lease := []float64{120, 300, 600}[rng.IntN(3)]
	p := New(0.8, lease, nil)
	p.EarlyEnd = true
	p.EarlyEndRho = []float64{1, 1, 0.7}[rng.IntN(3)]
	p.EarlyEndVictim = 1
	p.Seed(int64(rng.Uint32()))
	sc := &scene{p: p, t0: 10 * lease}
	type arrival struct {
		t    float64
		app  string
		diff int // apps arriving (+) or leaving (-) that are not in the scene
	}
	var arrivals []arrival
	nodes := 2 + rng.IntN(4)
	id := 0
	for n := range nodes {
		nd := node(fmt.Sprintf("n%d", n), fmt.Sprintf("r%d", n%2), 8)
		sc.nodes = append(sc.nodes, nd)
		for g := 0; g < 8; {
			gang := min([]int{1, 2, 4, 4, 8, 8}[rng.IntN(6)], 8-g)
			for gang&(gang-1) != 0 {
				gang--
			}
			app := fmt.Sprintf("R%d", id)
			j := core.Job{Key: core.JobKey{Namespace: "sim", ID: fmt.Sprintf("r%d", id)}, App: app, GPUs: gang, Phase: core.Granted,
				Started: true, Skew: 1 + rng.Float64()*0.3, Seq: uint64(id)}
			j.Executed = rng.Float64() * 2 * lease
			j.Attained = j.Executed * float64(gang)
			if rng.IntN(8) > 0 {
				j.Remaining = 10 + rng.Float64()*3*lease
				j.Work = j.Remaining + j.Executed
			} else {
				j.Remaining = -1
			}
			var gpus []string
			for k := range gang {
				gpus = append(gpus, nd.GPUs[g+k].ID)
			}
			g += gang
			sc.jobs = append(sc.jobs, j)
			sc.slow = append(sc.slow, []float64{1, 1, 1.2, 2, 3}[rng.IntN(5)])
			sc.held = append(sc.held, core.Grant{Job: j.Key, Node: nd.ID, GPUs: gpus})
			p.leases[j.Key] = at(sc.t0 + lease*(0.4+0.6*rng.Float64()))
			p.ran[app] = true
			arrivals = append(arrivals, arrival{t: sc.t0 - rng.Float64()*3*lease, app: app})
			id++
		}
	}
	for k := range 1 + rng.IntN(4) {
		app := fmt.Sprintf("N%d", k)
		gang := []int{1, 2, 4, 8, 16}[rng.IntN(5)]
		if gang > 8*nodes {
			gang = 8
		}
		arr := sc.t0 - rng.Float64()*lease
		j := core.Job{Key: core.JobKey{Namespace: "sim", ID: fmt.Sprintf("n%d", k)}, App: app, GPUs: gang, Skew: 1 + rng.Float64()*0.3,
			Submitted: at(arr), Seq: uint64(1000 + k)}
		if rng.IntN(4) > 0 {
			j.Remaining = lease * math.Pow(10, -2+3.3*rng.Float64()) // a hundredth to 20 leases
			j.Work = j.Remaining
		} else {
			j.Remaining = -1
		}
		sc.jobs = append(sc.jobs, j)
		sc.slow = append(sc.slow, 1)
		arrivals = append(arrivals, arrival{t: arr, app: app})
	}
	// Apps outside the scene: a crowd that came and left (N_avg above the
	// apps active now), or none (N_avg below: the scene's apps arrived one
	// by one).
	if rng.IntN(3) > 0 {
		crowd := 1 + rng.IntN(60)
		from := sc.t0 - 3*lease*rng.Float64()
		arrivals = append(arrivals, arrival{t: from, diff: crowd}, arrival{t: sc.t0 - (sc.t0-from)*rng.Float64()*rng.Float64(), diff: -crowd})
	}
	slices.SortFunc(arrivals, func(a, b arrival) int { return cmp.Compare(a.t, b.t) })
	n := 0
	for _, a := range arrivals {
		if a.app == "" {
			n += a.diff
		} else {
			n++
		}
		p.cont.Set(a.t, n)
		if a.app != "" {
			p.first[a.app] = a.t
			p.marks[a.app] = p.cont.Mark(a.t)
		}
	}
	return sc
}
