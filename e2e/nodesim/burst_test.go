package nodesim_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
)

// TestGrantBurst registers a burst of jobs at once against a real Nomad
// server, Consul and simulated nodes, and times submit -> all running,
// with the planner's rounds called back to back (as Run does under a
// stream of events), alternating bursts whose round pins its grants one
// after another (PinWorkers 1, as before) with bursts whose round pins
// them concurrently (PinWorkers 8): issue #35 part 2. Each burst's jobs
// take GPUs no earlier burst holds. The short version (make test) checks
// that both ways run every job on its own GPUs; THEMIS_E2E_SLOW=1 makes
// it the measurement (THEMIS_BURST_NODES, default 200, THEMIS_BURST_JOBS,
// default 40, THEMIS_BURST_PAIRS, default 6).
//
//	THEMIS_E2E_SLOW=1 go test ./e2e/nodesim -run TestGrantBurst -v -timeout 30m
func TestGrantBurst(t *testing.T) {
	nodes, jobs, pairs := 8, 8, 1
	if os.Getenv("THEMIS_E2E_SLOW") != "" {
		nodes = envInts(t, "THEMIS_BURST_NODES", []int{200})[0]
		jobs = envInts(t, "THEMIS_BURST_JOBS", []int{40})[0]
		pairs = envInts(t, "THEMIS_BURST_PAIRS", []int{6})[0]
	}
	const gpus = 2 // of a node's 8: every burst takes jobs*2 GPUs
	if 2*pairs*jobs*gpus > nodes*8 {
		t.Fatalf("%d bursts of %d %d-GPU jobs do not fit on %d nodes", 2*pairs, jobs, gpus, nodes)
	}
	bin := buildNodesim(t)
	h := startServer(t, nodes)
	startNodesim(t, h, bin, nodes)
	waitNodes(t, h, nodes, 3*time.Minute)
	// The planner's own clients, timing its calls by kind.
	calls := &callTimer{next: http.DefaultTransport, took: map[string]time.Duration{}, n: map[string]int{}}
	p, _, store := drivenPlanner(t, h, "fifo", core.Knobs{}, calls, calls)
	ctx := h.ctx
	if err := p.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}

	took := map[int][]time.Duration{}     // submit -> all running, by workers
	granting := map[int][]time.Duration{} // the round that granted the most
	toPinned := map[int][]time.Duration{} // submit -> all leased and pinned
	perJob := map[int][]time.Duration{}   // each job's submit -> running
	running, leased := 0, 0
	observer := consul.NewStore(h.consul) // the test's reads, untimed
	for i := range 2 * pairs {
		workers := []int{1, planner.ConcurrentPinWorkers}[i%2]
		p.SetPinWorkers(workers)
		prefix := fmt.Sprintf("burst%02d", i)
		calls.reset()
		began := time.Now()
		registerJobs(t, h.nomad, prefix, jobs, func(int) int { return gpus })
		registered := time.Since(began)
		var longest, pinned time.Duration
		for n := 0; ; n++ {
			start := time.Now()
			if err := p.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			longest = max(longest, time.Since(start))
			if pinned == 0 {
				// Every job leased (and so pinned: the round ends after
				// its pins).
				ls, err := observer.Leases(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(ls) >= leased+jobs {
					pinned, leased = time.Since(began), len(ls)
				}
			}
			allocs, _, err := h.nomad.Allocations().List(&nomadapi.QueryOptions{Filter: `ClientStatus == "running"`})
			if err != nil {
				t.Fatal(err)
			}
			if len(allocs) >= running+jobs {
				running = len(allocs)
				// Each job's submit -> running: from the burst's start
				// (every job registered within its first ~0.1 s) to its
				// allocation's last client update (running).
				for _, a := range allocs {
					if strings.HasPrefix(a.JobID, prefix) {
						perJob[workers] = append(perJob[workers], time.Unix(0, a.ModifyTime).Sub(began))
					}
				}
				break
			}
			if time.Since(began) > 3*time.Minute {
				t.Fatalf("burst %d (workers %d): %d of %d jobs running after %d rounds", i, workers, len(allocs)-running, jobs, n+1)
			}
			time.Sleep(20 * time.Millisecond) // the event stream's batching, roughly
		}
		d := time.Since(began)
		took[workers] = append(took[workers], d)
		granting[workers] = append(granting[workers], longest)
		toPinned[workers] = append(toPinned[workers], pinned)
		t.Logf("burst %d: %d jobs, pins by %d: all running in %s (registered in %s, all leased and pinned at %s; longest round %s); the planner's calls meanwhile: %s",
			i, jobs, workers, ms1(d), ms1(registered), ms1(pinned), ms1(longest), calls.String())
	}
	checkBurstLeases(t, h, store, 2*pairs*jobs, gpus)

	if os.Getenv("THEMIS_E2E_SLOW") == "" {
		return
	}
	p50 := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	old, now := p50(took[1]), p50(took[planner.ConcurrentPinWorkers])
	t.Logf("BURST nodes=%d jobs=%d pairs=%d: each job's submit -> running p50 %s one pin at a time, %s with %d at once (ratio new/old %.2f)",
		nodes, jobs, pairs, ms1(p50(perJob[1])), ms1(p50(perJob[planner.ConcurrentPinWorkers])), planner.ConcurrentPinWorkers,
		p50(perJob[planner.ConcurrentPinWorkers]).Seconds()/p50(perJob[1]).Seconds())
	t.Logf("BURST nodes=%d jobs=%d pairs=%d: submit -> all running p50 %s one pin at a time, %s with %d at once (ratio new/old %.2f); "+
		"submit -> all pinned p50 %s vs %s (ratio %.2f); longest round p50 %s vs %s (ratio %.2f); all: old %v new %v",
		nodes, jobs, pairs, ms1(old), ms1(now), planner.ConcurrentPinWorkers, now.Seconds()/old.Seconds(),
		ms1(p50(toPinned[1])), ms1(p50(toPinned[planner.ConcurrentPinWorkers])),
		p50(toPinned[planner.ConcurrentPinWorkers]).Seconds()/p50(toPinned[1]).Seconds(),
		ms1(p50(granting[1])), ms1(p50(granting[planner.ConcurrentPinWorkers])),
		p50(granting[planner.ConcurrentPinWorkers]).Seconds()/p50(granting[1]).Seconds(),
		roundAll(took[1]), roundAll(took[planner.ConcurrentPinWorkers]))
}

// checkBurstLeases checks that every burst job holds a lease of its own
// GPUs and runs on its node.
func checkBurstLeases(t *testing.T, h *harness, store *consul.Store, want, gpus int) {
	t.Helper()
	leases, err := store.Leases(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	n := 0
	for k, l := range leases {
		if !strings.HasPrefix(k.ID, "burst") {
			continue
		}
		n++
		if len(l.GPUs) != gpus {
			t.Errorf("%s: lease of %v, want %d GPUs", k, l.GPUs, gpus)
		}
		for _, g := range l.GPUs {
			if o, ok := owner[g]; ok {
				t.Errorf("GPU %s leased to %s and %s", g, o, k)
			}
			owner[g] = k.ID
		}
		allocs, _, err := h.nomad.Jobs().Allocations(k.ID, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(allocs) != 1 || allocs[0].ClientStatus != "running" || allocs[0].NodeID != l.NodeID {
			t.Errorf("%s: allocations %d, want one running on its lease's node %s", k, len(allocs), l.NodeName)
		}
	}
	if n != want {
		t.Errorf("%d burst jobs leased, want %d", n, want)
	}
}

// callTimer sums the time of HTTP calls by kind: Consul transactions
// (lease grants and releases, statuses), Nomad job reads (the snapshot's
// reads of new and changed jobs) and job registers (a pin's write, its
// one Nomad call), everything else.
type callTimer struct {
	next http.RoundTripper
	mu   sync.Mutex
	took map[string]time.Duration
	n    map[string]int
}

func (c *callTimer) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := "other"
	switch p := r.URL.Path; {
	case p == "/v1/txn":
		kind = "consul-txn"
	case strings.HasPrefix(p, "/v1/job/") && r.Method == http.MethodGet && !strings.Contains(p[len("/v1/job/"):], "/"):
		kind = "nomad-job-read"
	case (p == "/v1/jobs" || strings.HasPrefix(p, "/v1/job/")) && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		kind = "nomad-register"
	}
	start := time.Now()
	resp, err := c.next.RoundTrip(r)
	c.mu.Lock()
	c.took[kind] += time.Since(start)
	c.n[kind]++
	c.mu.Unlock()
	return resp, err
}

func (c *callTimer) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.took)
	clear(c.n)
}

// String is each kind's calls and their summed time (concurrent calls
// add up: more than the wall time they took).
func (c *callTimer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, k := range []string{"consul-txn", "nomad-job-read", "nomad-register", "other"} {
		out = append(out, fmt.Sprintf("%s %d in %s", k, c.n[k], ms1(c.took[k])))
	}
	return strings.Join(out, ", ")
}
