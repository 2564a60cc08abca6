package planner

import (
	"context"
	"flag"
	"fmt"
	"github.com/themis-nomad/themis/planner/plannertest"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/stack"
)

var restartTrials = flag.Int("planner.trials", 0, "random sequences per stack in TestRestartEquivalence (0: 2,500, or 200 with -short)")

// twin is one fake cluster with its planner.
type twin struct {
	clock time.Time
	Nomad *plannertest.Nomad
	Store *plannertest.Store
	p     *Planner
	// build makes the twin's stack: a stateful policy (themis) is one
	// per planner, built anew at every restart, as a new process would.
	build func() *stack.Stack
	// everyRound: its planner decides every round (Config.DecideEveryRound).
	everyRound bool
}

func newTwin(build func() *stack.Stack, start time.Time) *twin {
	w := &twin{clock: start, build: build}
	w.Nomad, w.Store = plannertest.NewCluster(&w.clock, 2, 8), plannertest.NewStore()
	w.restart()
	return w
}

// restart replaces the planner with a new one: everything it kept in
// memory is gone, as after a crash.
func (w *twin) restart() {
	w.p = New(Config{Nomad: w.Nomad, Store: w.Store, Stack: w.build(), Now: func() time.Time { return w.clock }, MaxKillTimeout: time.Hour, RestoreGuard: 5 * time.Second,
		DecideEveryRound: w.everyRound})
}

// state is what must agree between the twins: who holds which GPUs, which
// lease is being taken back, which grants wait for their GPUs, which
// allocations run, the job records and statuses.
func (w *twin) state() string {
	var b strings.Builder
	for _, k := range slices.SortedFunc(maps.Keys(w.Store.JobLeases), compareKeys) {
		l := w.Store.JobLeases[k]
		fmt.Fprintf(&b, "lease %s %v cells=%v revoking=%v ends=%d\n", k, l.GPUs, l.Cells, l.Revoke != nil, l.Ends.Unix())
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.Store.PendingGrants), compareKeys) {
		pg := w.Store.PendingGrants[k]
		fmt.Fprintf(&b, "pending %s %v ends=%d\n", k, pg.GPUs, pg.Ends.Unix())
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.Nomad.Allocs), compareKeys) {
		for _, a := range w.Nomad.Allocs[k] {
			fmt.Fprintf(&b, "alloc %s %s %s\n", k, a.NodeID, a.ClientStatus)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.Store.JobRecords), compareKeys) {
		r := w.Store.JobRecords[k]
		fmt.Fprintf(&b, "record %s executed=%g attained=%g preemptions=%d\n", k, r.Executed, r.Attained, r.Preemptions)
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.Store.JobStatuses), compareKeys) {
		st := w.Store.JobStatuses[k]
		fmt.Fprintf(&b, "status %s %s %s\n", k, st.State, st.Reason)
	}
	return b.String()
}

// Restart equivalence (invariant 5): a planner rebuilt from what Nomad and
// Consul hold, at any point, makes the same decisions as one that never
// stopped. Two identical fake clusters get the same random submissions,
// finishes and clock steps; one twin's planner is replaced by a new one at
// random rounds; after every round the twins' leases (GPUs, virtual cells,
// revokes), allocations, job records and statuses must be the same, and no
// task runs without its lease. The stacks cover the non-preemptive,
// make-room, preemptive and virtual-cluster paths, a preemptive policy
// inside virtual clusters, VCs with policies of their own, and the stateful
// policies whose memory is recorded in Consul (themis; tiresias-gittins
// learning job sizes): each twin's planner builds its own stack, anew at
// every restart. rand (its generator) keeps state in memory and is left
// out: see docs/design.md.
func TestRestartEquivalence(t *testing.T) {
	trials := *restartTrials
	if trials == 0 {
		trials = 2500
		if testing.Short() {
			trials = 200
		}
	}
	vcs, err := hived.ParseConfig("two-teams.hcl", []byte(twoTeamsTwoNodes))
	if err != nil {
		t.Fatal(err)
	}
	policies, err := hived.ParseConfig("two-policies.hcl", []byte(twoPoliciesTwoNodes))
	if err != nil {
		t.Fatal(err)
	}
	tiresias := mustKnobs(t, "tiresias.queues=60s", "tiresias.promote_knob=4")
	stacks := map[string]stack.Options{
		"fifo": {}, "fitgpp": {}, "las": {}, "tiresias-las": {Knobs: tiresias},
		// Themis keeps state between rounds (lease ends, arrivals,
		// contention, its auction's rounds): recorded in Consul.
		"themis": {Knobs: mustKnobs(t, "themis.lease=30s")},
		// tiresias-gittins without a distribution file learns job sizes
		// from the jobs that finish: recorded in Consul too.
		"tiresias-gittins": {Knobs: tiresias},
		"fifo+hived":       {VCs: vcs}, "tiresias-las+hived": {Knobs: tiresias, VCs: vcs},
		// Per-VC policies: vision runs fitgpp, speech tiresias-las.
		"fifo+vc-policies": {VCs: policies},
	}
	for _, name := range slices.Sorted(maps.Keys(stacks)) {
		opts := stacks[name]
		t.Run(name, func(t *testing.T) {
			policy, _, _ := strings.Cut(name, "+")
			st := mustStack(t, policy, opts)
			build := func() *stack.Stack { return st }
			if _, stateful := st.Policy.(core.Stateful); stateful {
				build = func() *stack.Stack { return mustStack(t, policy, opts) }
			}
			revoked, pended := 0, 0
			for trial := range trials {
				r, p := restartTrial(t, build, int64(trial))
				if r {
					revoked++
				}
				if p {
					pended++
				}
			}
			// The preemptive stacks' paths are exercised: some trials
			// take a guaranteed job's lease back (the policy's doing, not
			// HiveD evicting an opportunistic job).
			if policy != "fifo" && revoked == 0 {
				t.Errorf("no trial of %d revoked a lease", trials)
			}
			// Under Themis, grants wait for GPUs still held as pending
			// grants (pending.go), recorded in Consul: some trials have one.
			if _, leases := st.Policy.(core.LeaseEnder); leases && pended == 0 {
				t.Errorf("no trial of %d left a grant pending", trials)
			}
			t.Logf("%d of %d trials revoked a lease, %d left a grant pending", revoked, trials, pended)
		})
	}
}

// restartTrial runs one random sequence; revoked says whether some
// guaranteed job's lease was being taken back after some round.
func restartTrial(t *testing.T, build func() *stack.Stack, seed int64) (revoked, pended bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	start := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	a, b := newTwin(build, start), newTwin(build, start)
	st := a.p.stack()
	var log []string
	jobs := 0
	prio := map[string]int{}
	for round := range 25 {
		switch r := rng.Intn(10); {
		case r < 4 && jobs < 12:
			id := fmt.Sprintf("j%02d", jobs)
			jobs++
			var line string
			prio[id], line = submitRandom(rng, st, id, a, b)
			log = append(log, line)
		case r == 6:
			if line := loseRandom(rng, a, b); line != "" {
				log = append(log, line)
			}
		case r < 6:
			if line := finishRandom(rng, a, b); line != "" {
				log = append(log, line)
			}
		}
		if rng.Intn(4) == 0 {
			a.restart()
			log = append(log, "restart")
		}
		step := time.Duration(1+rng.Intn(20)) * time.Second
		for _, w := range []*twin{a, b} {
			if err := w.p.Reconcile(ctx); err != nil {
				t.Fatalf("seed %d round %d: %v\nevents: %s", seed, round, err, strings.Join(log, "; "))
			}
			plannertest.CheckNoTaskWithoutLease(t, w.Nomad, w.Store, fmt.Sprintf("seed %d round %d", seed, round))
			w.clock = w.clock.Add(step)
			w.Nomad.Settle()
		}
		for _, l := range a.Store.JobLeases {
			revoked = revoked || l.Revoke != nil && prio[l.JobID] >= 0
		}
		pended = pended || len(a.Store.PendingGrants) > 0
		if sa, sb := a.state(), b.state(); sa != sb {
			t.Fatalf("seed %d round %d: the restarted planner's cluster differs from the other's\nevents: %s\nrestarted:\n%s\nnever stopped:\n%s",
				seed, round, strings.Join(log, "; "), sa, sb)
		}
	}
	return revoked, pended
}

// submitRandom submits job id to every twin, with a random size (16: a
// gang on both nodes), class, grace period and, with VCs, VC and
// priority; it returns the priority and the event's log line.
func submitRandom(rng *rand.Rand, st *stack.Stack, id string, twins ...*twin) (prio int, line string) {
	gpus := []int{1, 2, 4, 8, 16}[rng.Intn(5)]
	class := []string{"be", "be", "te"}[rng.Intn(3)]
	grace := []string{"0s", "3s", "10s"}[rng.Intn(3)]
	vc := "default"
	if st.VCs != nil {
		vc, prio = []string{"vision", "speech"}[rng.Intn(2)], []int{0, 0, -1}[rng.Intn(3)]
	}
	for _, w := range twins {
		w.Nomad.SubmitIn(id, gpus, class, grace, vc, prio)
	}
	return prio, fmt.Sprintf("submit %s gpus=%d class=%s grace=%s vc=%s prio=%d", id, gpus, class, grace, vc, prio)
}

// loseRandom loses a random running job's allocation in every twin (a
// node dies under it); "" when no job runs.
func loseRandom(rng *rand.Rand, twins ...*twin) string {
	id := randomRunning(rng, twins[0])
	if id == "" {
		return ""
	}
	for _, w := range twins {
		w.Nomad.Running(id)[0].ClientStatus = "lost"
	}
	return "lose " + id
}

// finishRandom finishes a random running job in every twin; "" when no
// job runs.
func finishRandom(rng *rand.Rand, twins ...*twin) string {
	id := randomRunning(rng, twins[0])
	if id == "" {
		return ""
	}
	for _, w := range twins {
		w.Nomad.Finish(id)
	}
	return "finish " + id
}

// randomRunning is a random one of w's running jobs (the twins run the
// same ones), "" when none runs.
func randomRunning(rng *rand.Rand, w *twin) string {
	running := w.Nomad.RunningIDs()
	if len(running) == 0 {
		return ""
	}
	return running[rng.Intn(len(running))]
}

const twoTeamsTwoNodes = `
vc "vision" {
  cells {
    type  = "node8"
    count = 1
  }
  namespace "*" {}
}
vc "speech" {
  cells {
    type  = "socket4"
    count = 2
  }
  namespace "*" {}
}
`

const twoPoliciesTwoNodes = `
vc "vision" {
  policy = "fitgpp"
  cells {
    type  = "node8"
    count = 1
  }
  namespace "*" {}
}
vc "speech" {
  policy = "tiresias-las"
  knobs  = { "tiresias.queues" = "60s", "tiresias.promote_knob" = "4" }
  cells {
    type  = "socket4"
    count = 2
  }
  namespace "*" {}
}
`

func mustKnobs(t *testing.T, settings ...string) core.Knobs {
	t.Helper()
	k, err := core.ParseKnobs(settings)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
