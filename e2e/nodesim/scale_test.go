package nodesim_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomadread"
)

// TestScaleRounds measures the live planner's round against a real Nomad
// server and Consul at cluster scale (#35): for each node count of
// THEMIS_SCALE_NODES (default 100,300,1000) and queue length of
// THEMIS_SCALE_QUEUED (default 1000), a fresh server, that many simulated
// 8-GPU nodes (the nodesim command, a process of its own), every GPU held
// by a running 4-GPU job, and the queued jobs (1-8 GPUs) waiting behind
// them. It then times rounds where nothing changes (Reconcile called
// directly) three ways in the same cluster (listing everything;
// reading what changed but decoding every Consul value; decoding each
// value once), the Nomad snapshot alone, the requests and bytes each
// round reads, this process's RSS (the planner's; the nodes run in the
// nodesim process) and the nodesim process's CPU per node. A measurement,
// not a timed test: it fails only when the run itself fails. Set
// THEMIS_SCALE_PROFILE to a folder to get a CPU profile of the rounds, and
// THEMIS_SCALE_POLICY to run another policy than fifo, with the knobs of
// THEMIS_SCALE_KNOBS (space-separated key=value), and THEMIS_SCALE_CLASS
// to give every job that class (be, the default, or te).
//
//	THEMIS_E2E_SLOW=1 go test ./e2e/nodesim -run TestScaleRounds -v -timeout 60m
func TestScaleRounds(t *testing.T) {
	if os.Getenv("THEMIS_E2E_SLOW") == "" {
		t.Skip("a measurement of minutes: set THEMIS_E2E_SLOW=1")
	}
	bin := buildNodesim(t)
	for _, n := range envInts(t, "THEMIS_SCALE_NODES", []int{100, 300, 1000}) {
		for _, q := range envInts(t, "THEMIS_SCALE_QUEUED", []int{1000}) {
			t.Run(fmt.Sprintf("nodes=%d/queued=%d", n, q), func(t *testing.T) { measureScale(t, bin, n, q) })
		}
	}
}

// scalePolicy is TestScaleRounds's policy: THEMIS_SCALE_POLICY, or fifo.
func scalePolicy() string {
	if p := os.Getenv("THEMIS_SCALE_POLICY"); p != "" {
		return p
	}
	return "fifo"
}

// scaleKnobs are TestScaleRounds's knobs: THEMIS_SCALE_KNOBS.
func scaleKnobs(t *testing.T) core.Knobs {
	k, err := core.ParseKnobs(strings.Fields(os.Getenv("THEMIS_SCALE_KNOBS")))
	if err != nil {
		t.Fatalf("THEMIS_SCALE_KNOBS: %v", err)
	}
	return k
}

// cpuProfile starts a CPU profile of this process into path; the
// function returned stops it.
func cpuProfile(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func measureScale(t *testing.T, bin string, nodes, queued int) {
	h := startServer(t, nodes)
	sim, _ := startNodesim(t, h, bin, nodes)
	waitNodes(t, h, nodes, 3*time.Minute)

	nomadCalls, consulCalls := &counter{next: http.DefaultTransport}, &counter{next: http.DefaultTransport}
	p, nc, store := drivenPlanner(t, h, scalePolicy(), scaleKnobs(t), nomadCalls, consulCalls)
	ctx := h.ctx

	running := nodes * 2
	began := time.Now()
	registerJobs(t, h.nomad, "run", running, func(int) int { return 4 })
	t.Logf("registered %d running jobs in %s", running, time.Since(began).Round(time.Millisecond))
	for range 5 {
		if err := p.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Minute, fmt.Sprintf("%d allocations running", running), func() (bool, error) {
		allocs, _, err := h.nomad.Allocations().List(&nomadapi.QueryOptions{Filter: `ClientStatus == "running"`})
		return len(allocs) >= running, err
	})
	began = time.Now()
	registerJobs(t, h.nomad, "queued", queued, func(i int) int { return 1 + i%8 })
	t.Logf("registered %d queued jobs in %s", queued, time.Since(began).Round(time.Millisecond))
	// Rounds that read every new job once and write its status.
	var first []time.Duration
	for range 3 {
		start := time.Now()
		if err := p.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		first = append(first, time.Since(start))
	}

	// Rounds where nothing changes, first listing everything in Nomad and
	// Consul each round (as before #35), then reading what changed but
	// decoding every Consul value of the reused listings (before
	// planner/consul/decoded.go), then decoding each value once.
	// Last, as now: rounds where nothing changed end after reading the
	// change marks (planner/steady.go).
	for _, mode := range []struct {
		how                          string
		fullLists, decodeEvery, skip bool
	}{
		{"full-lists", true, true, false},
		{"incremental-decode-every", false, true, false},
		{"incremental", false, false, false},
		{"skip-unchanged", false, false, true},
	} {
		nc.SetFullLists(mode.fullLists)
		store.SetListCache(!mode.fullLists)
		store.SetDecodeCache(!mode.decodeEvery)
		p.SetDecideEveryRound(!mode.skip)
		skipped0 := p.Skipped()
		if err := p.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		how := mode.how
		decodes0 := store.Decodes()
		simCPU0, selfCPU0 := procCPU(t, sim.Process.Pid), procCPU(t, os.Getpid())
		nomadCalls.reset()
		consulCalls.reset()
		stopProfile := func() {}
		if dir := os.Getenv("THEMIS_SCALE_PROFILE"); dir != "" {
			stopProfile = cpuProfile(t, filepath.Join(dir, fmt.Sprintf("rounds-%d-%d-%s.pprof", nodes, queued, how)))
		}
		const rounds = 20
		measured := time.Now()
		var lat []time.Duration
		for range rounds {
			start := time.Now()
			if err := p.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		stopProfile()
		wall := time.Since(measured)
		nreq, nbytes := nomadCalls.take()
		creq, cbytes := consulCalls.take()
		nw, nl := nomadCalls.waits()
		cw, cl := consulCalls.waits()
		decodes := (store.Decodes() - decodes0) / rounds
		simCPU, selfCPU := procCPU(t, sim.Process.Pid)-simCPU0, procCPU(t, os.Getpid())-selfCPU0
		var snap []time.Duration
		for range 10 {
			start := time.Now()
			if _, err := nc.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			snap = append(snap, time.Since(start))
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		slices.Sort(lat)
		slices.Sort(snap)
		t.Logf("SCALE %s %s nodes=%d queued=%d running=%d: round p50 %s max(of %d) %s; first rounds %v; Nomad snapshot p50 %s; "+
			"per round Nomad %d requests %s, Consul %d requests %s (gzip'd bytes on the wire), %d Consul values decoded; planner process CPU %.0f%% of the rounds' wall, RSS %d MiB, heap %d MiB; "+
			"nodesim CPU %.2f ms/s per 100 nodes while the planner ran",
			scalePolicy(), how, nodes, queued, running, ms1(lat[len(lat)/2]), rounds, ms1(lat[len(lat)-1]), roundAll(first), ms1(snap[len(snap)/2]),
			nreq/rounds, mib(nbytes/rounds), creq/rounds, mib(cbytes/rounds), decodes,
			100*selfCPU.Seconds()/wall.Seconds(), rssKiB(t)/1024, ms.HeapInuse>>20,
			1000*simCPU.Seconds()/wall.Seconds()/float64(nodes)*100)
		if skipped := p.Skipped() - skipped0; mode.skip {
			// The round before the 20 made the steady state they skip on.
			t.Logf("SCALE %s: %d of %d rounds skipped; p99 of the 20 is their max", how, skipped, rounds+1)
		}
		t.Logf("SCALE %s: waiting for answers, a round: Nomad %s summed over its requests (longest of all %s), Consul %s (longest %s)",
			how, ms1(nw/rounds), ms1(nl), ms1(cw/rounds), ms1(cl))
	}
	p.SetDecideEveryRound(true)
	compareDecodes(ctx, t, p, store)
	compareAllocReads(ctx, t, h)
	// The nodes idle (no allocation changes) for 20 s: their heartbeats
	// and blocking queries alone.
	idle0 := procCPU(t, sim.Process.Pid)
	time.Sleep(20 * time.Second)
	idle := procCPU(t, sim.Process.Pid) - idle0
	t.Logf("SCALE nodes=%d: nodesim idle CPU %.2f ms/s per 100 nodes, RSS of nodesim %d MiB", nodes,
		1000*idle.Seconds()/20/float64(nodes)*100, procRSSKiB(t, sim.Process.Pid)/1024)
}

// registerJobs registers n themis jobs (prefix-00000, ...) of gpus(i) GPUs
// that run an hour, 8 at a time, of class THEMIS_SCALE_CLASS (default be).
func registerJobs(t *testing.T, nc *nomadapi.Client, prefix string, n int, gpus func(int) int) {
	t.Helper()
	registerEdited(t, nc, prefix, n, gpus, nil)
}

// registerEdited is registerJobs with edit (when not nil) applied to each
// job before it is registered.
func registerEdited(t *testing.T, nc *nomadapi.Client, prefix string, n int, gpus func(int) int, edit func(*nomadapi.Job)) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id := fmt.Sprintf("%s-%05d", prefix, i)
				job := Job(id, gpus(i), "1h")
				if c := os.Getenv("THEMIS_SCALE_CLASS"); c != "" {
					job.TaskGroups[0].Tasks[0].Config["themis"].([]map[string]any)[0]["class"] = c
				}
				if edit != nil {
					edit(job)
				}
				if _, _, err := nc.Jobs().Register(job, nil); err != nil {
					errs <- fmt.Errorf("register %s: %w", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func buildNodesim(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nodesim")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/nodesim").CombinedOutput()
	if err != nil {
		t.Fatalf("go build nodesim: %v\n%s", err, out)
	}
	return bin
}

// startNodesim runs the nodesim command with n nodes, 40 to a rack, until
// the test ends; it returns once every node registered, with a function
// that gives the counters the command printed last (every 5 s).
func startNodesim(t *testing.T, h *harness, bin string, n int) (*exec.Cmd, func() string) {
	t.Helper()
	cmd := exec.Command(bin, "-server", h.cluster.NomadRPCAddr(), "-nodes", strconv.Itoa(n), "-per-rack", "40", "-report", "5s")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "ready ") {
		t.Fatalf("nodesim did not start: %q", lines.Text())
	}
	t.Logf("nodesim: %s", lines.Text())
	var last atomic.Value
	last.Store("")
	go func() {
		for lines.Scan() {
			last.Store(lines.Text())
		}
	}()
	return cmd, func() string { return last.Load().(string) }
}

// waitNodes waits until n nodes are ready.
func waitNodes(t *testing.T, h *harness, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%d nodes ready", n), func() (bool, error) {
		nodes, _, err := h.nomad.Nodes().List(&nomadapi.QueryOptions{Filter: `Status == "ready"`})
		return len(nodes) >= n, err
	})
}

// counter counts an HTTP client's requests, the bytes of their
// responses, and how long each waited for its answer's headers (summed,
// and the longest).
type counter struct {
	next            http.RoundTripper
	reqs, bytes     atomic.Int64
	waited, longest atomic.Int64 // nanoseconds
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	began := time.Now()
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	w := int64(time.Since(began))
	c.waited.Add(w)
	for l := c.longest.Load(); w > l && !c.longest.CompareAndSwap(l, w); l = c.longest.Load() {
	}
	c.reqs.Add(1)
	resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
	return resp, nil
}

func (c *counter) reset() {
	c.reqs.Store(0)
	c.bytes.Store(0)
	c.waited.Store(0)
	c.longest.Store(0)
}
func (c *counter) take() (reqs, bytes int64) { return c.reqs.Load(), c.bytes.Load() }

// waits is the requests' waits for their answers since the reset: summed
// and the longest.
func (c *counter) waits() (sum, longest time.Duration) {
	return time.Duration(c.waited.Load()), time.Duration(c.longest.Load())
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// procCPU is process pid's user+system CPU time so far.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

func rssKiB(t *testing.T) int { return procRSSKiB(t, os.Getpid()) }

func procRSSKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, _ := strconv.Atoi(f[1])
			return kib
		}
	}
	return 0
}

func envInts(t *testing.T, name string, def []int) []int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("%s=%q: %v", name, v, err)
		}
		out = append(out, n)
	}
	return out
}

func ms1(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

func roundAll(ds []time.Duration) []string {
	var out []string
	for _, d := range ds {
		out = append(out, ms1(d))
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

// compareDecodes times no-change rounds decoding every Consul value of the
// reused listings and decoding each value once in turn, round by round, so
// that the shared machine's load weighs on both alike: each round's wall
// time and the planner process's CPU time (getrusage, every thread) for
// the round and a collection forced after it, so that each round pays for
// its own garbage (else one way's garbage is collected during the other's
// rounds; the forced collection's marking of the live heap weighs on both
// alike). Turning the cache off keeps its values, so the rounds that use
// it find it warm.
func compareDecodes(ctx context.Context, t *testing.T, p *planner.Planner, store *consul.Store) {
	const rounds = 40 // 20 each way
	var lat [2][]time.Duration
	var cpu [2]time.Duration
	var decodes [2]uint64
	for i := range rounds {
		once := i % 2
		store.SetDecodeCache(once == 1)
		d0, c0, start := store.Decodes(), selfRusage(t), time.Now()
		if err := p.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		lat[once] = append(lat[once], time.Since(start))
		runtime.GC() // the round's garbage, collected on its account
		cpu[once] += selfRusage(t) - c0
		decodes[once] += store.Decodes() - d0
	}
	for i := range lat {
		slices.Sort(lat[i])
	}
	n := time.Duration(rounds / 2)
	t.Logf("SCALE decoding in turn, %d rounds each: every value: round p50 %s, planner CPU %s a round with its GC, %d values decoded a round; "+
		"each value once: round p50 %s, planner CPU %s a round with its GC, %d decoded a round; once/every: p50 %.2f, CPU %.2f",
		rounds/2, ms1(lat[0][len(lat[0])/2]), ms1(cpu[0]/n), decodes[0]/uint64(n), ms1(lat[1][len(lat[1])/2]), ms1(cpu[1]/n), decodes[1]/uint64(n),
		lat[1][len(lat[1])/2].Seconds()/lat[0][len(lat[0])/2].Seconds(), cpu[1].Seconds()/cpu[0].Seconds())
}

// selfRusage is this process's user+system CPU time so far, from getrusage
// (finer than /proc's clock ticks).
func selfRusage(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startCPU notes the CPU time so far of the named processes and of the
// whole machine (/proc/stat); the function it returns says how many cores
// each used on average since, and how busy the machine was.
func startCPU(t *testing.T, pids map[string]int) func() string {
	t.Helper()
	names := slices.Sorted(maps.Keys(pids))
	was := map[string]time.Duration{}
	for _, n := range names {
		was[n] = procCPU(t, pids[n])
	}
	busy0, all0 := machineCPU(t)
	began := time.Now()
	return func() string {
		wall := time.Since(began).Seconds()
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "%s %.2f, ", n, (procCPU(t, pids[n])-was[n]).Seconds()/wall)
		}
		busy, all := machineCPU(t)
		fmt.Fprintf(&b, "the machine %.2f of %d busy", float64(runtime.NumCPU())*float64(busy-busy0)/float64(max(all-all0, 1)), runtime.NumCPU())
		return b.String()
	}
}

// machineCPU is the machine's busy and total CPU ticks (/proc/stat's cpu
// line; idle and iowait count as not busy).
func machineCPU(t *testing.T) (busy, all int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	// user nice system idle iowait irq softirq steal (guest time is
	// counted in user already).
	for i, f := range fields[1:min(9, len(fields))] {
		n, _ := strconv.ParseInt(f, 10, 64)
		all += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, all
}

// compareAllocReads times, at this size, what a read of the allocations
// costs when the table moved: Nomad's list of every allocation with its
// task states (the planner's read before nomadread.Allocs), with its
// resources too (the watcher's), and without either (the list every such
// read now starts with), then 8 allocations read one by one (what 8
// changed allocations add to it). Medians of 10, with the bytes each
// read took (as the counter sees them).
func compareAllocReads(ctx context.Context, t *testing.T, h *harness) {
	t.Helper()
	c := &counter{next: http.DefaultTransport}
	cfg := nomadapi.DefaultConfig()
	cfg.Address, cfg.HttpClient = h.cluster.NomadAddr(), &http.Client{Transport: c}
	nc, err := nomadapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	median := func(read func() error) (time.Duration, int64) {
		var took []time.Duration
		c.reset()
		for range 10 {
			start := time.Now()
			if err := read(); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		_, bytes := c.take()
		slices.Sort(took)
		return took[len(took)/2], bytes / 10
	}
	list := func(params map[string]string) func() error {
		return func() error {
			_, _, err := nc.Allocations().List((&nomadapi.QueryOptions{Namespace: "*", Params: params}).WithContext(ctx))
			return err
		}
	}
	stubs, _, err := nc.Allocations().List((&nomadapi.QueryOptions{Namespace: "*", Params: map[string]string{"task_states": "false"}}).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range []struct {
		what string
		read func() error
	}{
		{"list with task states (the planner's, before)", list(nil)},
		{"list with task states and resources (the watcher's, before)", list(map[string]string{"resources": "true"})},
		{"list without either (every read's first call now)", list(map[string]string{"task_states": "false"})},
		{"8 read one by one, 8 at once", func() error {
			var wg sync.WaitGroup
			errs := make([]error, min(8, len(stubs)))
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = nomadread.Alloc(ctx, nc, stubs[i].Namespace, stubs[i].ID, true)
				}()
			}
			wg.Wait()
			return errors.Join(errs...)
		}},
	} {
		took, bytes := median(r.read)
		lines = append(lines, fmt.Sprintf("%s %s %s", r.what, ms1(took), mib(bytes)))
	}
	t.Logf("SCALE allocation reads, %d allocations: %s", len(stubs), strings.Join(lines, "; "))
}
