package nodesim_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/sim"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

// TestScalePhilly is the scale run of #35: one Nomad server, a Consul, the
// live planner and 1,000 simulated 8-GPU nodes in 25 racks of 40 (the
// nodesim command), and the first THEMIS_SCALE_JOBS (default 1,000) jobs
// of the busiest day of the Philly trace (../shared/traces/philly.csv,
// day 47: 3,643 jobs), time-compressed so that their arrivals take half of
// each policy's share of THEMIS_SCALE_WALL (default 20m), durations capped
// at a quarter of it, and drain in the rest; under fifo, tiresias-las and fifo with 10
// teams' virtual clusters (100 nodes each; the trace's VCs mapped onto
// them), each on a fresh cluster, with the invariant watcher on
// throughout. Each run reports the planner's round time (p50, p99), its
// RSS, submit -> running for jobs that did not queue, and the avg JCT live
// against the simulator's on the same cluster and jobs; and, over the
// trace, the cores each process used (the Nomad server, Consul, the
// nodesim command, this process) and the whole machine, with the
// simulator's counters (its nodes' blocking queries for allocations, and
// how many of them woke a node for nothing of its own). It fails on an
// invariant violation, a job that did not finish, or a failed round; the
// figures are a measurement (docs/scale.md). THEMIS_SCALE_IDLE_ONLY=1
// measures only submit -> running on the idle cluster (10 jobs one at a
// time), which every run measures first. THEMIS_SCALE_PIN_WORKERS lists
// the Config.PinWorkers to run each policy with (default 1: one pin at a
// time; "1,8": each policy twice, on a fresh cluster each, sharing the
// wall time). THEMIS_SCALE_ALLOC_READS lists how the planner and the
// watcher read allocations: changed (the default: only changed ones in
// full, nomadread.Allocs) or full (every one, as before); "full,changed"
// runs each policy both ways. THEMIS_SCALE_MARKS lists how the planner
// reads Nomad's change mark: watch (the default: blocking queries follow
// the indexes, planner/nomad/marks.go) or probe (three one-row lists each
// round, as before). THEMIS_SCALE_PROFILE names a folder for a CPU profile of
// this process (the planner, the watcher, the submitter) over each run's
// trace.
//
//	THEMIS_E2E_SLOW=1 go test ./e2e/nodesim -run TestScalePhilly -v -timeout 60m
func TestScalePhilly(t *testing.T) {
	if os.Getenv("THEMIS_E2E_SLOW") == "" {
		t.Skip("the scale run takes about 20 minutes: set THEMIS_E2E_SLOW=1")
	}
	wall := 20 * time.Minute
	if v := os.Getenv("THEMIS_SCALE_WALL"); v != "" {
		var err error
		if wall, err = time.ParseDuration(v); err != nil {
			t.Fatalf("THEMIS_SCALE_WALL=%q: %v", v, err)
		}
	}
	nodes := 1000
	if v := envInts(t, "THEMIS_SCALE_NODES", nil); len(v) > 0 {
		nodes = v[0]
	}
	jobs := 1000
	if v := envInts(t, "THEMIS_SCALE_JOBS", nil); len(v) > 0 {
		jobs = v[0]
	}
	bin := buildNodesim(t)
	policies := []string{"fifo", "tiresias-las", "fifo+vcs"}
	if v := os.Getenv("THEMIS_SCALE_POLICIES"); v != "" {
		policies = strings.Split(v, ",")
	}
	pins := envInts(t, "THEMIS_SCALE_PIN_WORKERS", []int{1})
	reads := envChoices(t, "THEMIS_SCALE_ALLOC_READS", "changed", "full")
	marks := envChoices(t, "THEMIS_SCALE_MARKS", "watch", "probe")
	share := wall / time.Duration(len(policies)*len(pins)*len(reads)*len(marks))
	for _, name := range policies {
		for _, n := range pins {
			for _, how := range reads {
				for _, mark := range marks {
					sub := name
					if len(pins) > 1 || n != 1 {
						sub = fmt.Sprintf("%s/pins=%d", name, n)
					}
					if len(reads) > 1 || how != "changed" {
						sub += "/allocs=" + how
					}
					if len(marks) > 1 || mark != "watch" {
						sub += "/marks=" + mark
					}
					t.Run(sub, func(t *testing.T) { runPhilly(t, bin, name, nodes, jobs, share, n, how == "full", mark == "probe") })
				}
			}
		}
	}
}

// envChoices is the comma-separated list in the environment variable
// name, each one of def and others; [def] when unset.
func envChoices(t *testing.T, name, def string, others ...string) []string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return []string{def}
	}
	out := strings.Split(v, ",")
	for _, c := range out {
		if c != def && !slices.Contains(others, c) {
			t.Fatalf("%s: %q is none of %s", name, c, strings.Join(append([]string{def}, others...), ", "))
		}
	}
	return out
}

// tenTeams gives each of 10 teams a tenth of the nodes.
func tenTeams(nodes int) string {
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, "vc \"team-%d\" {\n  cells {\n    type  = \"node8\"\n    count = %d\n  }\n  namespace \"*\" {}\n}\n", i, nodes/10)
	}
	return b.String()
}

// phillyDay is the first n jobs (all when n is 0) of the busiest day of
// the Philly trace, compressed so that their arrivals take arrivals:
// submit times and durations divided by the same factor, durations at
// least 1 s and at most maxDur, the trace's VCs mapped onto 10 teams in
// order of first appearance.
func phillyDay(t *testing.T, n int, arrivals, maxDur time.Duration) (*trace.Trace, float64) {
	t.Helper()
	tr, err := trace.Load(filepath.Join("..", "..", "..", "shared", "traces", "philly.csv"))
	if err != nil {
		t.Skipf("the Philly trace: %v", err)
	}
	perDay := map[int]int{}
	for _, j := range tr.Jobs {
		perDay[int(j.Submit/86400)]++
	}
	day, most := 0, 0
	for d, c := range perDay {
		if c > most || (c == most && d < day) {
			day, most = d, c
		}
	}
	var jobs []trace.Job
	for _, j := range tr.Jobs { // sorted by submit time
		if int(j.Submit/86400) == day && (n == 0 || len(jobs) < n) {
			jobs = append(jobs, j)
		}
	}
	span := jobs[len(jobs)-1].Submit - jobs[0].Submit
	factor := math.Max(span/arrivals.Seconds(), 1)
	teams := map[string]string{}
	out := &trace.Trace{Name: fmt.Sprintf("philly-day%d-first%d-x%.0f", day, len(jobs), factor), Format: tr.Format}
	first := jobs[0].Submit
	for _, j := range jobs {
		if _, ok := teams[j.VC]; !ok {
			teams[j.VC] = fmt.Sprintf("team-%d", len(teams)%10)
		}
		j.VC = teams[j.VC]
		j.Submit = math.Round((j.Submit-first)/factor*10) / 10
		j.Duration = math.Min(math.Max(math.Round(j.Duration/factor), 1), maxDur.Seconds())
		out.Jobs = append(out.Jobs, j)
	}
	return out, factor
}

type liveJob struct {
	submitted, started, finished time.Time
}

func runPhilly(t *testing.T, bin, name string, nodes, jobs int, share time.Duration, pins int, allocsInFull, markProbes bool) {
	policy, vcs := strings.CutSuffix(name, "+vcs")
	arrivals := share / 2
	tr, factor := phillyDay(t, jobs, arrivals, share/4)
	opts := stack.Options{}
	if vcs {
		cfg, err := hived.ParseConfig("ten-teams.hcl", []byte(tenTeams(nodes)))
		if err != nil {
			t.Fatal(err)
		}
		opts.VCs = cfg
	}
	st, err := stack.Build(policy, opts)
	if err != nil {
		t.Fatal(err)
	}
	gpus := 0
	for _, j := range tr.Jobs {
		gpus += j.GPUs
	}
	t.Logf("%s: the first %d jobs (%d GPUs asked in all) of Philly's busiest day, compressed %.0fx: arrivals over %s",
		tr.Name, len(tr.Jobs), gpus, factor, arrivals)

	h := startServer(t, nodes)
	simCmd, simStats := startNodesim(t, h, bin, nodes)
	waitNodes(t, h, nodes, 3*time.Minute)
	violations := watchReading(t, h, allocsInFull)

	var mu sync.Mutex // the submitter's times (live)
	var rounds roundLog
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address = h.cluster.NomadAddr()
	ncfg.HttpClient = &http.Client{}
	pn, err := nomadapi.NewClient(ncfg)
	if err != nil {
		t.Fatal(err)
	}
	nc := nomad.NewClient(pn, "", h.log.Named("nomad"))
	nc.SetAllocReadsInFull(allocsInFull)
	nc.SetMarkWatches(!markProbes)
	p := planner.New(planner.Config{Nomad: nc, Store: consul.NewStore(h.consul),
		Stack: st, Resync: 5 * time.Second, PinWorkers: pins, MaxKillTimeout: 30 * time.Minute, RestoreGuard: 2 * time.Second, Log: h.log.Named("planner"),
		OnRoundTime: rounds.record})
	serve(t, h, p)

	// Submit -> running on the idle cluster: 10 jobs of 1 GPU one after
	// another, each from its registration to its task's start on a node.
	var idleLat []float64
	for i := range 10 {
		id := fmt.Sprintf("idle-%02d", i)
		job := Job(id, 1, "1s")
		if vcs {
			inVC("team-0")(job)
		}
		_, took := timeStart(t, h, job)
		idleLat = append(idleLat, took.Seconds())
	}
	slices.Sort(idleLat)
	if os.Getenv("THEMIS_SCALE_IDLE_ONLY") != "" {
		t.Logf("PHILLY %s nodes=%d: submit->running idle cluster p50 %.2fs max %.2fs (10 jobs one at a time); the trace skipped (THEMIS_SCALE_IDLE_ONLY)",
			name, nodes, idleLat[len(idleLat)/2], idleLat[len(idleLat)-1])
		return
	}

	stopProfile := func() {}
	if dir := os.Getenv("THEMIS_SCALE_PROFILE"); dir != "" {
		stopProfile = cpuProfile(t, filepath.Join(dir, fmt.Sprintf("philly-%s-pins%d.pprof", strings.ReplaceAll(name, "+", "-"), pins)))
	}
	cpu := startCPU(t, map[string]int{"nomad server": h.cluster.ServerPid(), "consul": h.consulPid,
		"nodesim": simCmd.Process.Pid, "test process (planner, watcher, submitter)": os.Getpid()})
	simStats0 := simStats()
	began := time.Now()
	live := make([]liveJob, len(tr.Jobs))
	rssPeak := 0
	ctx, cancel := context.WithCancel(h.ctx) // the submitter stops when the run does
	defer cancel()
	go func() {
		for i, j := range tr.Jobs {
			at := began.Add(time.Duration(j.Submit * float64(time.Second)))
			time.Sleep(time.Until(at))
			if ctx.Err() != nil {
				return
			}
			job := Job(phillyID(i), j.GPUs, fmt.Sprintf("%gs", j.Duration))
			if vcs {
				inVC(j.VC)(job)
			}
			mu.Lock()
			live[i].submitted = time.Now()
			mu.Unlock()
			if _, _, err := h.nomad.Jobs().Register(job, nil); err != nil {
				t.Errorf("register %s: %v", phillyID(i), err)
				return
			}
		}
	}()
	deadline := began.Add(share)
	finished := 0
	for time.Now().Before(deadline) && finished < len(tr.Jobs) {
		time.Sleep(2 * time.Second)
		rssPeak = max(rssPeak, rssKiB(t))
		stubs, _, err := h.nomad.Jobs().List(&nomadapi.QueryOptions{Prefix: "philly-", Filter: `Status == "dead"`})
		if err != nil {
			continue
		}
		finished = len(stubs)
	}
	stopProfile()
	cpuUse, simStats1 := cpu(), simStats()
	// Task start and finish of each job, from its allocations.
	var unfinished []string
	for i := range tr.Jobs {
		allocs, _, err := h.nomad.Jobs().Allocations(phillyID(i), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range allocs {
			ts := a.TaskStates["train"]
			if ts == nil {
				continue
			}
			if !ts.StartedAt.IsZero() && (live[i].started.IsZero() || ts.StartedAt.Before(live[i].started)) {
				live[i].started = ts.StartedAt
			}
			if a.ClientStatus == "complete" && ts.FinishedAt.After(live[i].finished) {
				live[i].finished = ts.FinishedAt
			}
		}
		if live[i].finished.IsZero() {
			unfinished = append(unfinished, phillyID(i))
		}
	}
	if len(unfinished) > 0 {
		t.Errorf("%d of %d jobs did not finish within %s: %v", len(unfinished), len(tr.Jobs), share, unfinished[:min(10, len(unfinished))])
	}

	// The simulator on the same cluster and jobs, placing as the live
	// planner does, with the live start latency.
	var startLat []float64
	for i := range live {
		if !live[i].started.IsZero() {
			startLat = append(startLat, live[i].started.Sub(live[i].submitted).Seconds())
		}
	}
	slices.Sort(startLat)
	simStart := 0.0
	if len(startLat) > 0 {
		simStart = startLat[len(startLat)/2]
	}
	cl, err := cluster.Uniform("nodesim", (nodes+39)/40, 40, 8)
	if err != nil {
		t.Fatal(err)
	}
	sst, err := stack.Build(policy, opts)
	if err != nil {
		t.Fatal(err)
	}
	scfg := sim.Config{Trace: tr, Cluster: cl, Policy: sst.Policy, Seed: 1, StartCost: simStart, EqualParts: true, Victims: sst.Victims, VictimTie: sst.VictimTie}
	if sst.VCs != nil {
		pl, err := sst.NewPlacer(cl.Nodes)
		if err != nil {
			t.Fatal(err)
		}
		hp := pl.(*hived.Placer)
		hp.SetEqualParts(true)
		scfg.Placer = hp
	}
	sr, err := sim.Run(scfg)
	if err != nil {
		t.Fatal(err)
	}
	// Submit -> running for the jobs the simulator started at once (GPUs
	// were free), and the JCTs.
	var liveJCT, simJCT, noQueue []float64
	var noQueueIDs []string
	var noQueueSubmitted []time.Time
	for i, sj := range sr.Jobs {
		if live[i].finished.IsZero() {
			continue
		}
		liveJCT = append(liveJCT, live[i].finished.Sub(live[i].submitted).Seconds())
		simJCT = append(simJCT, sj.JCT())
		if sj.Start-sj.Submit <= simStart+0.001 && !live[i].started.IsZero() {
			noQueue = append(noQueue, live[i].started.Sub(live[i].submitted).Seconds())
			noQueueIDs = append(noQueueIDs, phillyID(i))
			noQueueSubmitted = append(noQueueSubmitted, live[i].submitted)
		}
	}
	lat, starts, nfailed := rounds.read()
	slices.Sort(lat)
	slices.Sort(noQueue)
	pct := func(xs []float64, q float64) float64 {
		if len(xs) == 0 {
			return math.NaN()
		}
		return xs[min(len(xs)-1, int(math.Ceil(q*float64(len(xs))))-1)]
	}
	dpct := func(xs []time.Duration, q float64) time.Duration {
		if len(xs) == 0 {
			return 0
		}
		return xs[min(len(xs)-1, int(math.Ceil(q*float64(len(xs))))-1)]
	}
	la, sa := meanOf(liveJCT), meanOf(simJCT)
	tag := fmt.Sprintf("%s pins=%d", name, pins)
	if allocsInFull {
		tag += " allocs=full"
	}
	if markProbes {
		tag += " marks=probe"
	}
	t.Logf("PHILLY %s nodes=%d jobs=%d finished=%d: rounds %d (failed %d) p50 %s p99 %s max %s; planner RSS peak %d MiB; "+
		"submit->running idle cluster p50 %.2fs max %.2fs (10 jobs one at a time), under the trace (jobs the simulator started at once) p50 %.2fs p99 %.2fs n=%d; avg JCT live %.1fs sim %.1fs (%+.1f%%); preemptions sim %d; violations %d",
		tag, nodes, len(tr.Jobs), len(liveJCT), len(lat), nfailed, ms1(dpct(lat, 0.5)), ms1(dpct(lat, 0.99)), ms1(dpct(lat, 1)), rssPeak/1024,
		idleLat[len(idleLat)/2], idleLat[len(idleLat)-1], pct(noQueue, 0.5), pct(noQueue, 0.99), len(noQueue), la, sa, 100*(sa-la)/la, sr.Preemptions, violations())
	t.Logf("PHILLY %s start split (jobs the simulator started at once): submit->running mean %.2fs; %s",
		tag, meanOf(noQueue), splitSummary(splitStarts(t, h, noQueueIDs, noQueueSubmitted, starts)))
	t.Logf("PHILLY %s CPU over the trace (cores on average): %s", tag, cpuUse)
	t.Logf("PHILLY %s nodesim's counters (printed every 5 s) before the trace: %s; at its end: %s", tag, simStats0, simStats1)
	if v := violations(); v != 0 {
		t.Errorf("%d invariant violations", v)
	}
	if nfailed > 0 {
		t.Errorf("%d rounds failed", nfailed)
	}
}

func phillyID(i int) string { return fmt.Sprintf("philly-%04d", i) }

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// timeStart registers job and waits (a minute at most) for its task to
// start on a node: when it was submitted, and how long after that the
// task started.
func timeStart(t *testing.T, h *harness, job *nomadapi.Job) (time.Time, time.Duration) {
	t.Helper()
	id := *job.ID
	submitted := time.Now()
	if _, _, err := h.nomad.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	var started time.Time
	waitFor(t, time.Minute, id+" running", func() (bool, error) {
		allocs, _, err := h.nomad.Jobs().Allocations(id, true, nil)
		for _, a := range allocs {
			if ts := a.TaskStates["train"]; ts != nil && !ts.StartedAt.IsZero() {
				started = ts.StartedAt
				return true, nil
			}
		}
		return false, err
	})
	return submitted, started.Sub(submitted)
}
