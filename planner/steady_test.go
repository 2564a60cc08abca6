package planner

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/plannertest"
	"github.com/themis-nomad/themis/planner/stack"
)

// Skip equivalence: a planner that skips the rounds where nothing changed
// (steady.go) leaves the cluster exactly as one that decides every round.
// Two identical fake clusters get the same random submissions, finishes,
// lost allocations and clock steps, with many rounds where nothing happens
// but the clock (when time alone must change a decision: LAS's service
// passing a waiting job's, Tiresias's thresholds and promotions, restore
// guards, gangs' place timeouts); after every round their leases,
// allocations, records and statuses must be the same. The steady stacks
// must skip some rounds (else this tests nothing), and the ones whose
// policy cannot say how long its decision stands must skip none (every
// policy of the registry says so now, some only in some states).
func TestSkipEquivalence(t *testing.T) {
	vcs, err := hived.ParseConfig("two-teams.hcl", []byte(twoTeamsTwoNodes))
	if err != nil {
		t.Fatal(err)
	}
	policies, err := hived.ParseConfig("two-policies.hcl", []byte(twoPoliciesTwoNodes))
	if err != nil {
		t.Fatal(err)
	}
	tiresias := mustKnobs(t, "tiresias.queues=60s", "tiresias.promote_knob=4")
	stacks := map[string]struct {
		opts  stack.Options
		skips bool
	}{
		"fifo": {skips: true}, "fifo-skip": {skips: true}, "gandiva": {skips: true}, "las": {skips: true},
		"tiresias-las":       {opts: stack.Options{Knobs: tiresias}, skips: true},
		"fifo+hived":         {opts: stack.Options{VCs: vcs}, skips: true},
		"tiresias-las+hived": {opts: stack.Options{Knobs: tiresias, VCs: vcs}, skips: true},
		// fitgpp in one VC, tiresias-las in the other.
		"fifo+vc-policies": {opts: stack.Options{VCs: policies}, skips: true},
		"fitgpp":           {skips: true},
		"lrtp":             {skips: true},
		// Remaining time, known from the progress reports below.
		"srtf": {skips: true}, "srsf": {skips: true}, "optimus": {skips: true},
		// 2D-Gittins learning its distribution from the jobs that finish
		// (few do: mostly its thresholds), and from a prior whose sizes
		// the jobs' service passes, with a second queue to rank in.
		"tiresias-gittins":       {opts: stack.Options{Knobs: tiresias}, skips: true},
		"tiresias-gittins+prior": {opts: stack.Options{Knobs: gittinsPrior(t)}, skips: true},
		// Themis: until a lease ends, and with jobs waiting only while
		// no GPU is offered, until a lease could end early. rand: while
		// trial-and-error jobs wait too (a round that draws acts).
		"themis": {opts: stack.Options{Knobs: mustKnobs(t, "themis.lease=30s")}, skips: true},
		"rand":   {skips: true},
	}
	trials := 300
	if testing.Short() {
		trials = 40
	}
	for _, name := range slices.Sorted(maps.Keys(stacks)) {
		c := stacks[name]
		t.Run(name, func(t *testing.T) {
			policy, _, _ := strings.Cut(name, "+")
			build := func() *stack.Stack { return mustStack(t, policy, c.opts) }
			var n skipCounts
			for trial := range trials {
				n.add(skipTrial(t, build, int64(trial)))
			}
			t.Logf("%d of %d rounds skipped (%d while a job waited, %d while a trial-and-error job did); %d leases taken back in rounds where only the clock moved",
				n.skipped, n.rounds, n.skippedWaiting, n.skippedTEWaiting, n.quietRevokes)
			switch {
			case c.skips && n.skipped == 0:
				t.Errorf("no round of %d was skipped", n.rounds)
			case !c.skips && n.skipped > 0:
				t.Errorf("%d rounds skipped under a policy that cannot say how long its decision stands", n.skipped)
			}
			if (policy == "las" || name == "tiresias-las" || name == "tiresias-gittins+prior") && n.quietRevokes == 0 {
				t.Errorf("no lease was taken back by time alone: the time-driven path is not exercised")
			}
			if policy == "themis" && n.skippedWaiting == 0 {
				t.Errorf("no round was skipped while a job waited: Themis's early-end horizon is not exercised")
			}
			if (policy == "rand" || policy == "fitgpp") && n.skippedTEWaiting == 0 {
				t.Errorf("no round was skipped while a trial-and-error job waited: the rounds that may make room are not exercised")
			}
		})
	}
}

// gittinsPrior configures 2D-Gittins with two queues and a prior of job
// sizes (GPU-seconds) spread over the service skipTrial's jobs attain.
func gittinsPrior(t *testing.T) core.Knobs {
	path := filepath.Join(t.TempDir(), "sizes.csv")
	sizes := "duration\n"
	for _, s := range []int{15, 40, 40, 90, 130, 200, 260, 400, 520, 700, 880, 1500, 2400} {
		sizes += fmt.Sprintf("%d\n", s)
	}
	if err := os.WriteFile(path, []byte(sizes), 0o644); err != nil {
		t.Fatal(err)
	}
	return mustKnobs(t, "tiresias.queues=60s,900s", "tiresias.promote_knob=4", "tiresias.gittins_dist="+path)
}

// skipCounts is what skipTrial counts: how many rounds the skipping twin
// skipped, of how many, and of those how many while a job waited, and
// while a trial-and-error job waited (rand's and FitGpp's rounds that may
// make room); quietRevokes is
// how many leases the twin deciding every round began taking back in a
// round where only the clock had moved.
type skipCounts struct{ skipped, rounds, skippedWaiting, skippedTEWaiting, quietRevokes int64 }

func (n *skipCounts) add(o skipCounts) {
	n.skipped += o.skipped
	n.rounds += o.rounds
	n.skippedWaiting += o.skippedWaiting
	n.skippedTEWaiting += o.skippedTEWaiting
	n.quietRevokes += o.quietRevokes
}

// skipTrial runs one random sequence on a twin that decides every round
// and one that skips, and counts what skipCounts says.
func skipTrial(t *testing.T, build func() *stack.Stack, seed int64) (n skipCounts) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	every := newTwin(build, start)
	every.everyRound = true
	every.restart()
	skip := newTwin(build, start)
	st := every.p.stack()
	var log []string
	jobs := 0
	te := map[core.JobKey]bool{}
	for round := range 40 {
		quiet := false
		switch r := rng.Intn(10); {
		case r < 2 && jobs < 12:
			id := fmt.Sprintf("j%02d", jobs)
			jobs++
			_, line := submitRandom(rng, st, id, every, skip)
			log = append(log, line)
			te[core.JobKey{Namespace: "default", ID: id}] = strings.Contains(line, " class=te ")
		case r == 2:
			if line := loseRandom(rng, every, skip); line != "" {
				log = append(log, line)
			}
		case r == 3:
			if line := finishRandom(rng, every, skip); line != "" {
				log = append(log, line)
			}
		case r == 4:
			if line := reportRandom(rng, every, skip); line != "" {
				log = append(log, line)
			}
		default:
			quiet = true
		}
		step := time.Duration(1+rng.Intn(30)) * time.Second
		revoking := countRevoking(every.Store)
		for _, w := range []*twin{every, skip} {
			before := w.p.Skipped()
			if err := w.p.Reconcile(ctx); err != nil {
				t.Fatalf("seed %d round %d: %v\nevents: %s", seed, round, err, strings.Join(log, "; "))
			}
			if w == skip && w.p.Skipped() > before {
				log = append(log, "(skipped)")
				if waiting(w, nil) {
					n.skippedWaiting++
				}
				if waiting(w, te) {
					n.skippedTEWaiting++
				}
			}
			plannertest.CheckNoTaskWithoutLease(t, w.Nomad, w.Store, fmt.Sprintf("seed %d round %d", seed, round))
			w.clock = w.clock.Add(step)
			w.Nomad.Settle()
		}
		log = append(log, fmt.Sprintf("+%s", step))
		if c := countRevoking(every.Store); quiet && c > revoking {
			n.quietRevokes += int64(c - revoking)
		}
		n.rounds++
		if a, b := every.state(), skip.state(); a != b {
			t.Fatalf("seed %d round %d: the skipping planner's cluster differs from the one deciding every round\nevents: %s\ndeciding every round:\n%s\nskipping:\n%s",
				seed, round, strings.Join(log, "; "), a, b)
		}
	}
	n.skipped = skip.p.Skipped()
	return n
}

// waiting reports whether a job is queued in w (its status as the last
// round that ran wrote it), one of only when given.
func waiting(w *twin, only map[core.JobKey]bool) bool {
	for k, st := range w.Store.JobStatuses {
		if (only == nil || only[k]) && st.State == "queued" {
			return true
		}
	}
	return false
}

// reportRandom writes a progress report for a random running job in every
// twin, with a random total and rate, so its remaining time becomes known
// (and falls with the clock after that); "" when no job runs. The report
// stays when the job stops: a waiting job's remaining time is then known
// too.
func reportRandom(rng *rand.Rand, twins ...*twin) string {
	id := randomRunning(rng, twins[0])
	if id == "" {
		return ""
	}
	total, rate := int64(100+rng.Intn(2000)), float64(1+rng.Intn(20))
	done := rng.Int63n(total)
	for _, w := range twins {
		if w.Store.ProgressRecords == nil {
			w.Store.ProgressRecords = map[core.JobKey]lease.ProgressRecord{}
		}
		k := core.JobKey{Namespace: "default", ID: id}
		w.Store.ProgressRecords[k] = lease.ProgressRecord{Namespace: "default", JobID: id, AllocID: w.Nomad.Running(id)[0].ID,
			Iteration: done, Total: total, Rate: rate, At: w.clock}
	}
	return fmt.Sprintf("report %s %d/%d at %g/s", id, done, total, rate)
}

// countRevoking counts the leases being taken back.
func countRevoking(s *plannertest.Store) int {
	n := 0
	for _, l := range s.JobLeases {
		if l.Revoke != nil {
			n++
		}
	}
	return n
}

// TestSkipEndsOnChange: a round after a steady one is skipped while
// nothing changes, even as the clock moves (fifo), until FullRoundEvery
// passed; a submission, a change in Consul, a new stack or
// DecideEveryRound each make the next round run.
func TestSkipEndsOnChange(t *testing.T) {
	h := newHarness(t, 8, mustStack(t, "fifo", stack.Options{}))
	h.Nomad.Submit("a", 4, "be", "0s")
	h.Round("grant a")
	h.Round("a pinned") // the pin moved Nomad's mark: this round runs
	ran := func(what string) bool {
		t.Helper()
		before := h.P.Skipped()
		h.Round(what)
		return h.P.Skipped() == before
	}
	if ran("nothing changed") {
		t.Fatal("a round where nothing changed ran")
	}
	// (Each round moves the clock on by a second.)
	h.Clock = h.Clock.Add(FullRoundEvery / 2)
	if ran("minutes later, fifo") {
		t.Fatal("fifo's decision stands for ever, but a round ran minutes later with nothing changed")
	}
	h.Clock = h.Clock.Add(FullRoundEvery / 2)
	if !ran("FullRoundEvery after the last full round") {
		t.Fatal("no full round ran FullRoundEvery after the last")
	}
	if ran("steady after the full round") {
		t.Fatal("not steady after the full round")
	}
	h.Nomad.Submit("b", 2, "be", "0s")
	if !ran("b submitted") {
		t.Fatal("the round after a submission was skipped")
	}
	if len(h.Nomad.Running("b")) == 0 && h.Store.JobLeases[core.JobKey{Namespace: "default", ID: "b"}].LeaseID == "" {
		t.Fatal("b was not granted")
	}
	h.Round("b pinned")
	if ran("steady again") {
		t.Fatal("not steady again")
	}
	rec := h.Store.JobRecords[core.JobKey{Namespace: "default", ID: "a"}]
	rec.Attained++
	h.Store.JobRecords[rec.Key()] = rec
	if !ran("a record changed in Consul") {
		t.Fatal("the round after a change in Consul was skipped")
	}
	if ran("steady") {
		t.Fatal("not steady again")
	}
	h.P.SetStack(mustStack(t, "fifo", stack.Options{}))
	if !ran("a new stack") {
		t.Fatal("the round after SetStack was skipped")
	}
	h.config.DecideEveryRound = true
	h.Restart()
	for i := range 3 {
		if !ran(fmt.Sprintf("decide every round %d", i)) {
			t.Fatal("a round was skipped with DecideEveryRound")
		}
	}
}

// A planner with an observer (the HTTP API's OnRound, which wraps its
// store to note grants and releases) skips as one without: the observer
// is told of each skipped round, and its last decided view stands.
func TestSkipWithAnObserver(t *testing.T) {
	var views []View
	h := newHarness(t, 8, mustStack(t, "fifo", stack.Options{}))
	h.config = Config{Nomad: h.Nomad, Store: h.Store, Stack: mustStack(t, "fifo", stack.Options{}),
		Now: func() time.Time { return h.Clock }, OnRound: func(v View) { views = append(views, v) }}
	h.Restart()
	h.Nomad.Submit("a", 4, "be", "0s")
	for i := range 4 {
		h.Round(fmt.Sprintf("round %d", i))
	}
	if h.P.Skipped() == 0 {
		t.Fatal("no round was skipped with an observer")
	}
	last := views[len(views)-1]
	if !last.Skipped || last.Decided || last.Err != nil {
		t.Fatalf("the observer's last view: skipped %v, decided %v, err %v; want a skipped round", last.Skipped, last.Decided, last.Err)
	}
}
