package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// Two virtual clusters of one node each on the 3-client dev cluster; the
// third node is for opportunistic jobs (and either VC's jobs that fit in
// their cells' idle GPUs opportunistically).
const loadVCs = `
vc "vision" {
  cells {
    type  = "node8"
    count = 1
  }
  namespace "*" {}
}
vc "speech" {
  cells {
    type  = "node8"
    count = 1
  }
  namespace "*" {}
}
`

// A load run: n short jobs through the real Nomad API to the 3-client dev
// cluster, a fitgpp planner (preemptive: trial-and-error jobs preempt
// best-effort ones) with two virtual clusters, the invariant watcher
// throughout. Sizes 1-8 GPUs, classes be/te, both VCs, a quarter of them
// opportunistic; each job is hello for 1 s (10 steps of 100 ms). At most
// window jobs are outstanding (submitted, not finished); finished jobs are
// purged as they are counted (what Nomad's job GC does, sooner), so the
// cluster's state stays the size of the window. Records the planner's round
// latency and this process's RSS (the planner runs in it) over time.
type loadResult struct {
	jobs        int
	wall        time.Duration
	rounds      []time.Duration
	failed      int // rounds that returned an error
	peakRSS     int // KiB
	violations  int
	unfinished  []string
	preemptions int
}

func runLoad(t *testing.T, n, window int, timeout time.Duration) loadResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(env.ctx, timeout+3*time.Minute)
	defer cancel()
	m := startMultiCluster(t, ctx)
	violations := watching(t, ctx, m.nomad, m.consul)
	vcs, err := hived.ParseConfig("load-vcs.hcl", []byte(loadVCs))
	if err != nil {
		t.Fatal(err)
	}
	st := mustStack(t, "fitgpp", stack.Options{VCs: vcs})
	if err := st.Live(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var res loadResult
	pctx, pcancel := context.WithCancel(ctx)
	// THEMIS_LOAD_CALLS=1 gives the planner its own Nomad and Consul
	// clients whose requests are timed (load_calls_test.go) and logs, each
	// 30 s, the calls' time by path, the status records written by reason
	// and the CPU time of the agents, this process and the host.
	pnomad, pconsul := m.nomad, m.consul
	var nomadCalls, consulCalls *callTimer
	calls := os.Getenv("THEMIS_LOAD_CALLS") != ""
	if calls {
		nomadCalls, consulCalls = newCallTimer("nomad"), newCallTimer("consul")
		ncfg := nomadapi.DefaultConfig()
		ncfg.Address = m.cluster.NomadAddr()
		ncfg.HttpClient = &http.Client{Transport: nomadCalls}
		if pnomad, err = nomadapi.NewClient(ncfg); err != nil {
			t.Fatal(err)
		}
		ccfg := consulapi.DefaultConfig()
		ccfg.Address = m.consulAddr
		ccfg.HttpClient = &http.Client{Transport: consulCalls}
		if pconsul, err = consulapi.NewClient(ccfg); err != nil {
			t.Fatal(err)
		}
	}
	cpuDir := filepath.Dir(m.cluster.DataDir())
	var prevCPU map[string]time.Duration
	if calls {
		prevCPU = agentCPU(cpuDir)
	}
	p := planner.New(planner.Config{
		Nomad: nomad.NewClient(pnomad, "", env.log.Named("load-nomad")), Store: consul.NewStore(pconsul),
		Stack: st, Resync: 5 * time.Second, MaxKillTimeout: 30 * time.Minute, RestoreGuard: 2 * time.Second,
		Log: env.log.Named("load-planner").With("policy", "fitgpp"),
		OnRoundTime: func(took time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			res.rounds = append(res.rounds, took)
			if err != nil {
				res.failed++
			}
		},
	})
	pdone := make(chan error, 1)
	go func() { pdone <- p.Run(pctx) }()
	defer func() {
		pcancel()
		if err := <-pdone; err != nil {
			t.Errorf("planner: %v", err)
		}
	}()

	rng := rand.New(rand.NewPCG(21, uint64(n)))
	sizes := []int{1, 1, 2, 2, 3, 4, 4, 6, 8}
	vcNames := []string{"vision", "speech"}
	jobOf := func(i int) trainJob {
		o := trainJob{gpus: sizes[rng.IntN(len(sizes))], steps: 10, grace: "5s", vc: vcNames[i%2]}
		if rng.IntN(10) < 3 {
			o.class = "te"
		}
		if rng.IntN(4) == 0 {
			o.priority = -1
		}
		return o
	}
	id := func(i int) string { return fmt.Sprintf("load-%04d", i) }
	t.Cleanup(func() {
		for i := range n {
			_, _, _ = m.nomad.Jobs().Deregister(id(i), true, nil)
		}
	})

	began := time.Now()
	deadline := began.Add(timeout)
	submitted, finished := 0, 0
	outstanding := map[string]bool{}
	nextReport := began.Add(30 * time.Second)
	// THEMIS_LOAD_GC_AT=90s runs Nomad's server GC (PUT /v1/system/gc) once,
	// that far into the run, to see whether Nomad's state of purged jobs
	// slows the rounds.
	// The GC collects the dead jobs not purged yet: those count as finished.
	gcAt, _ := time.ParseDuration(os.Getenv("THEMIS_LOAD_GC_AT"))
	gcRan := false
	reported := 0 // rounds already in a report
	for finished < n && time.Now().Before(deadline) {
		for submitted < n && len(outstanding) < window {
			job := jobOf(submitted).build(t, id(submitted))
			if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
				t.Fatalf("register %s: %v", id(submitted), err)
			}
			outstanding[id(submitted)] = true
			submitted++
		}
		time.Sleep(500 * time.Millisecond)
		if gcAt > 0 && time.Since(began) > gcAt {
			gcAt, gcRan = 0, true
			start := time.Now()
			err := m.nomad.System().GarbageCollect()
			t.Logf("%s: Nomad server GC: %v, took %s", time.Since(began).Round(time.Second), err, time.Since(start).Round(time.Millisecond))
		}
		stubs, _, err := m.nomad.Jobs().List(&nomadapi.QueryOptions{Prefix: "load-"})
		if err != nil {
			t.Logf("list jobs: %v", err)
			continue
		}
		if gcRan {
			listed := map[string]bool{}
			for _, s := range stubs {
				listed[s.ID] = true
			}
			for id := range outstanding {
				if !listed[id] {
					t.Logf("%s was collected by the GC", id)
					delete(outstanding, id)
					finished++
				}
			}
		}
		for _, s := range stubs {
			if !outstanding[s.ID] || s.Status != "dead" || s.JobSummary == nil {
				continue
			}
			done := false
			for _, g := range s.JobSummary.Summary {
				done = done || g.Complete > 0
			}
			if !done {
				continue
			}
			if _, _, err := m.nomad.Jobs().Deregister(s.ID, true, nil); err != nil {
				t.Logf("purge %s: %v", s.ID, err)
				continue
			}
			delete(outstanding, s.ID)
			finished++
		}
		if rss := vmRSS(); rss > res.peakRSS {
			mu.Lock()
			res.peakRSS = rss
			mu.Unlock()
		}
		if time.Now().After(nextReport) {
			nextReport = nextReport.Add(30 * time.Second)
			mu.Lock()
			r := slices.Clone(res.rounds[reported:])
			reported = len(res.rounds)
			mu.Unlock()
			p50, p95, p99 := quantile(r, 0.5), quantile(r, 0.95), quantile(r, 0.99)
			t.Logf("%s: %d submitted, %d finished, %d outstanding; %d rounds in the last 30 s (p50 %s, p95 %s, p99 %s); RSS %d MiB",
				time.Since(began).Round(time.Second), submitted, finished, len(outstanding), len(r),
				p50.Round(time.Millisecond), p95.Round(time.Millisecond), p99.Round(time.Millisecond), vmRSS()/1024)
			if calls {
				label := time.Since(began).Round(time.Second).String()
				nomadCalls.window(t, label, len(r))
				consulCalls.window(t, label, len(r))
				cur := agentCPU(cpuDir)
				logCPU(t, label, prevCPU, cur)
				prevCPU = cur
			}
		}
	}
	res.wall = time.Since(began)
	res.jobs = finished
	if calls {
		// The last, partial window, and the whole run's status writes.
		mu.Lock()
		r := slices.Clone(res.rounds[reported:])
		mu.Unlock()
		consulCalls.window(t, "end", len(r))
		consulCalls.total(t)
	}
	for k := range outstanding {
		res.unfinished = append(res.unfinished, k)
	}
	for i := submitted; i < n; i++ {
		res.unfinished = append(res.unfinished, id(i))
	}
	slices.Sort(res.unfinished)
	// Leases left over: there must be none once every job finished.
	if len(res.unfinished) == 0 {
		eventually(t, 30*time.Second, "every lease to be released", func() (bool, error) {
			ls, err := consul.NewStore(m.consul).Leases(ctx)
			return err == nil && len(ls) == 0, fmt.Errorf("%d leases (%v)", len(ls), err)
		})
	}
	// What a round's snapshot lists at the end (the jobs were purged).
	if as, _, err := m.nomad.Allocations().List(&nomadapi.QueryOptions{Namespace: "*"}); err == nil {
		js, _, _ := m.nomad.Jobs().List(&nomadapi.QueryOptions{Namespace: "*"})
		keys, _, _ := m.consul.KV().Keys("themis/", "", nil)
		byPrefix := map[string]int{}
		for _, k := range keys {
			parts := strings.SplitN(k, "/", 3)
			if len(parts) > 1 {
				byPrefix[parts[1]]++
			}
		}
		t.Logf("at the end Nomad lists %d jobs and %d allocations; Consul has %d keys under themis/ %v", len(js), len(as), len(keys), byPrefix)
		for _, k := range keys[:min(len(keys), 5)] {
			p, _, _ := m.consul.KV().Get(k, nil)
			if p != nil {
				t.Logf("  %s = %s", k, p.Value)
			}
		}
	}
	res.violations = violations()
	mu.Lock()
	defer mu.Unlock()
	res.rounds = slices.Clone(res.rounds)
	return res
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// vmRSS is this process's resident set size in KiB (/proc/self/status).
func vmRSS() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return n
		}
	}
	return 0
}

func (r loadResult) report(t *testing.T, cmd string) {
	t.Helper()
	t.Logf("load (%s): %d jobs finished in %s (%.2f jobs/s); %d rounds, %d failed, round p50 %s, p95 %s, p99 %s, max %s; peak RSS %d MiB (this process: planner, driver, watcher); %d violations; %d unfinished",
		cmd, r.jobs, r.wall.Round(time.Second), float64(r.jobs)/r.wall.Seconds(), len(r.rounds), r.failed,
		quantile(r.rounds, 0.5).Round(time.Millisecond), quantile(r.rounds, 0.95).Round(time.Millisecond), quantile(r.rounds, 0.99).Round(time.Millisecond),
		quantile(r.rounds, 1).Round(time.Millisecond), r.peakRSS/1024, r.violations, len(r.unfinished))
	if len(r.unfinished) > 0 {
		t.Errorf("%d jobs did not finish: %v", len(r.unfinished), r.unfinished[:min(20, len(r.unfinished))])
	}
}

// TestLoad2000 submits 2,000 jobs (slow: about 14 minutes; make test-slow
// TEST=TestLoad2000). THEMIS_LOAD_JOBS=n submits n instead; THEMIS_LOAD_CALLS=1
// logs each 30 s window's call times and CPU (runLoad), THEMIS_LOAD_GC_AT=90s
// runs Nomad's server GC once that far into the run.
func TestLoad2000(t *testing.T) {
	slow(t)
	n := 2000
	if s := os.Getenv("THEMIS_LOAD_JOBS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	runLoad(t, n, 48, 25*time.Minute).report(t, "THEMIS_E2E_SLOW=1 go test ./e2e -run TestLoad2000")
}

// TestLoad100 is the short variant: 100 jobs (about 45 s here, so it runs
// with THEMIS_E2E_SLOW=1 too).
func TestLoad100(t *testing.T) {
	slow(t)
	runLoad(t, 100, 48, 3*time.Minute).report(t, "go test ./e2e -run TestLoad100")
}
