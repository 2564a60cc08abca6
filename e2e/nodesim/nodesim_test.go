package nodesim_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/e2e/nodesim"
	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/check"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// 30 themis jobs of 8 GPUs for 2 s each through a real Nomad server, a
// Consul and a fifo planner onto 20 simulated 8-GPU nodes in 2 racks: the
// Nomad scheduler places each pinned job on its simulated node with the
// leased GPUs, every job runs and completes (20 at once, then the other 10
// on the freed nodes), every lease is released, and the invariant watcher
// sees no violation.
func TestNodesimRunsPinnedJobs(t *testing.T) {
	h := startServer(t, 20)
	sim := startNodes(t, h, nodesim.Cluster(20, 10))
	ids := sim.NodeIDs()
	waitFor(t, 30*time.Second, "20 simulated nodes ready with 8 themis GPUs each", func() (bool, error) {
		nodes, _, err := h.nomad.Nodes().List(&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes {
			gpus := 0
			if n.NodeResources != nil {
				for _, d := range n.NodeResources.Devices {
					if d.Vendor == "themis" {
						gpus += len(d.Instances)
					}
				}
			}
			if n.Status == "ready" && gpus == 8 && ids[n.Name] == n.ID {
				ready++
			}
		}
		return ready == 20, nil
	})
	violations := watch(t, h)
	runPlanner(t, h, "fifo")

	const jobs = 30
	for i := range jobs {
		if _, _, err := h.nomad.Jobs().Register(Job(fmt.Sprintf("sim-%02d", i), 8, "2s"), nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			explain(t, h, "sim-00")
		}
	})
	waitFor(t, 90*time.Second, "every job dead with a complete allocation", func() (bool, error) {
		done := 0
		for i := range jobs {
			id := fmt.Sprintf("sim-%02d", i)
			allocs, _, err := h.nomad.Jobs().Allocations(id, true, nil)
			if err != nil {
				return false, err
			}
			for _, a := range allocs {
				if a.ClientStatus == "complete" {
					done++
					break
				}
			}
		}
		return done == jobs, nil
	})
	// Every allocation ran on a simulated node, on 8 of its own GPUs.
	for i := range jobs {
		id := fmt.Sprintf("sim-%02d", i)
		allocs, _, err := h.nomad.Jobs().Allocations(id, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, stub := range allocs {
			a, _, err := h.nomad.Allocations().Info(stub.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			var devs []string
			for _, tr := range a.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					devs = append(devs, d.DeviceIDs...)
				}
			}
			node := a.NodeName
			if ids[node] != a.NodeID || len(devs) != 8 {
				t.Errorf("%s: allocation on node %s (%s) with devices %v", id, node, a.NodeID, devs)
			}
			for _, d := range devs {
				if !strings.HasPrefix(d, "SIM-"+node+"-") {
					t.Errorf("%s: device %s is not node %s's", id, d, node)
				}
			}
			if ts := a.TaskStates["train"]; ts == nil || ts.FinishedAt.Sub(ts.StartedAt) < 2*time.Second {
				t.Errorf("%s: task state %+v, want a run of at least 2 s", id, ts)
			}
		}
	}
	waitFor(t, 30*time.Second, "every lease released", func() (bool, error) {
		keys, _, err := h.consul.KV().Keys("themis/leases/", "", nil)
		return len(keys) == 0, err
	})
	st := sim.Stats()
	if st.Started < jobs || st.Completed < jobs || st.Failed != 0 {
		t.Errorf("simulator: %+v", st)
	}
	if v := violations(); v != 0 {
		t.Errorf("%d invariant violations", v)
	}
	t.Logf("simulator: %+v", st)
}

// Job is a themis job of gpus GPUs that runs d on a simulated node (its
// nodesim.duration meta), waiting in the pending pool for a grant.
func Job(id string, gpus int, d string) *nomadapi.Job {
	one, zero := 1, 0
	batch, pending, fail := "batch", nomad.DefaultPendingPool, "fail"
	no := false
	return &nomadapi.Job{
		ID: &id, Name: &id, Type: &batch, NodePool: &pending, Datacenters: []string{"*"},
		TaskGroups: []*nomadapi.TaskGroup{{
			Name: ptr("train"), Count: &one,
			RestartPolicy:    &nomadapi.RestartPolicy{Attempts: &zero, Mode: &fail},
			ReschedulePolicy: &nomadapi.ReschedulePolicy{Attempts: &zero, Unlimited: &no},
			Tasks: []*nomadapi.Task{{
				Name: "train", Driver: "themis",
				Config: map[string]any{"command": "/bin/true", "themis": []map[string]any{{
					"gpus": gpus, "class": "be", "grace_period": "5s",
				}}},
				Meta:      map[string]string{nodesim.DurationMeta: d},
				Resources: &nomadapi.Resources{CPU: ptr(100), MemoryMB: ptr(64)},
			}},
		}},
	}
}

func ptr[T any](v T) *T { return &v }

type harness struct {
	ctx     context.Context
	cluster *devstack.Cluster
	nomad   *nomadapi.Client
	consul  *consulapi.Client
	log     hclog.Logger
	// consulAddr is Consul's HTTP address.
	consulAddr string
	// consulPid is the Consul agent's process id.
	consulPid int
}

// startNodes starts simulated nodes of top against h's Nomad server,
// stopped when the test ends.
func startNodes(t *testing.T, h *harness, top *topology.Topology) *nodesim.Sim {
	t.Helper()
	sim, err := nodesim.Start(h.ctx, nodesim.Config{Server: h.cluster.NomadRPCAddr(), Topology: top, Log: h.log.Named("nodesim")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	return sim
}

// startServer starts a Consul and a Nomad server without clients (the
// simulated nodes join it), both stopped when the test ends.
func startServer(t *testing.T, nodes int) *harness {
	t.Helper()
	agents := agentsDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: os.Stderr})
	dir := t.TempDir()
	templates, err := filepath.Abs("../../examples/agents")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := devstack.StartConsul(ctx, devstack.Config{ConsulBin: filepath.Join(agents, "consul"), Templates: templates,
		DataDir: filepath.Join(dir, "consul"), Log: log.Named("consul")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cs.Stop)
	cluster, err := devstack.StartCluster(ctx, devstack.Config{NomadBin: filepath.Join(agents, "nomad"), Templates: templates,
		DataDir: filepath.Join(dir, "nomad"), ServerOnly: true, Ports: devstack.Ports{ConsulHTTP: consulPort(t, cs.ConsulAddr())},
		Log: log.Named("nomad")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address = cluster.NomadAddr()
	nc, err := nomadapi.NewClient(ncfg)
	if err != nil {
		t.Fatal(err)
	}
	ccfg := consulapi.DefaultConfig()
	ccfg.Address = cs.ConsulAddr()
	cc, err := consulapi.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{ctx: ctx, cluster: cluster, nomad: nc, consul: cc, log: log, consulAddr: cs.ConsulAddr(), consulPid: cs.Pids()[0]}
}

// agentsDir is where the pinned Nomad and Consul are: THEMIS_AGENTS_DIR,
// else what e2e/agents/build.sh builds (once) and prints.
func agentsDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("THEMIS_AGENTS_DIR"); d != "" {
		return d
	}
	out, err := exec.Command("../agents/build.sh").Output()
	if err != nil {
		t.Fatalf("build the pinned Nomad and Consul (e2e/agents/build.sh): %v", err)
	}
	return strings.TrimSpace(string(out))
}

func consulPort(t *testing.T, addr string) int {
	t.Helper()
	var port int
	if _, err := fmt.Sscanf(addr[strings.LastIndex(addr, ":")+1:], "%d", &port); err != nil {
		t.Fatalf("consul address %q: %v", addr, err)
	}
	return port
}

// runPlanner runs the live planner with policy until the test ends.
func runPlanner(t *testing.T, h *harness, policy string) {
	t.Helper()
	st, err := stack.Build(policy, stack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := planner.New(planner.Config{Nomad: nomad.NewClient(h.nomad, "", h.log.Named("nomad")), Store: consul.NewStore(h.consul),
		Stack: st, Resync: 5 * time.Second, MaxKillTimeout: 30 * time.Minute, RestoreGuard: 2 * time.Second, Log: h.log.Named("planner")})
	serve(t, h, p)
}

// drivenPlanner is a planner of the policy and knobs for a test to run
// rounds of itself, its pending pool made; its Nomad and Consul clients go
// through the given transports (to count or time its calls).
func drivenPlanner(t *testing.T, h *harness, policy string, knobs core.Knobs, nomadRT, consulRT http.RoundTripper) (*planner.Planner, *nomad.Client, *consul.Store) {
	t.Helper()
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address, ncfg.HttpClient = h.cluster.NomadAddr(), &http.Client{Transport: nomadRT}
	pn, err := nomadapi.NewClient(ncfg)
	if err != nil {
		t.Fatal(err)
	}
	ccfg := consulapi.DefaultConfig()
	ccfg.Address, ccfg.HttpClient = h.consulAddr, &http.Client{Transport: consulRT}
	pc, err := consulapi.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	nc := nomad.NewClient(pn, "", h.log.Named("nomad"))
	if err := nc.EnsurePendingPool(h.ctx); err != nil {
		t.Fatal(err)
	}
	st, err := stack.Build(policy, stack.Options{Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	store := consul.NewStore(pc)
	p := planner.New(planner.Config{Nomad: nc, Store: store, Stack: st, MaxKillTimeout: 30 * time.Minute,
		RestoreGuard: time.Second, Log: h.log.Named("planner")})
	return p, nc, store
}

// serve runs planner p until the test ends (then reports its error), and
// waits for p's pending node pool.
func serve(t *testing.T, h *harness, p *planner.Planner) {
	t.Helper()
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("planner: %v", err)
		}
	})
	waitFor(t, 30*time.Second, "the planner's pending pool", func() (bool, error) {
		pool, _, err := h.nomad.NodePools().Info(nomad.DefaultPendingPool, nil)
		return pool != nil, err
	})
}

// watch runs the invariant watcher until the test ends; the count is the
// violations it saw so far (each logged).
func watch(t *testing.T, h *harness) func() int { return watchReading(t, h, false) }

// watchReading is watch, its reader listing every allocation in full at
// every pass when allocsInFull (check.Reader.AllocsInFull).
func watchReading(t *testing.T, h *harness, allocsInFull bool) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(h.ctx)
	count := make(chan int, 1)
	count <- 0
	w := &check.Watcher{Reader: &check.Reader{Nomad: h.nomad, Consul: h.consul, AllocsInFull: allocsInFull}, Tolerances: check.DefaultTolerances,
		Report: func(v check.Violation) {
			t.Logf("invariant violation: %v", v)
			count <- <-count + 1
		}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = w.Pass(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() int { n := <-count; count <- n; return n }
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		done, err := ok()
		if done && err == nil {
			return
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
}

// explain logs why Nomad did not place job id (its evaluations' failed
// placements), for a failing test.
func explain(t *testing.T, h *harness, id string) {
	evals, _, err := h.nomad.Jobs().Evaluations(id, nil)
	if err != nil {
		t.Logf("evaluations of %s: %v", id, err)
		return
	}
	for _, e := range evals {
		t.Logf("%s eval %s: %s %s %s", id, e.ID[:8], e.TriggeredBy, e.Status, e.StatusDescription)
		for tg, m := range e.FailedTGAllocs {
			t.Logf("  group %s: evaluated %d filtered %d exhausted %d classes %v constraints %v dims %v pools %v",
				tg, m.NodesEvaluated, m.NodesFiltered, m.NodesExhausted, m.ClassFiltered, m.ConstraintFiltered, m.DimensionExhausted, m.NodePool)
		}
	}
}
