package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/check"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// serverConsul is a Consul server that is not -dev: one server
// (bootstrap_expect = 1) keeping its state in a data dir, so that it can be
// restarted with its KV (the leases) intact, as an operator restarts Consul.
type serverConsul struct {
	bin, conf, dir string
	port           int
	cmd            *exec.Cmd
	done           chan error
}

func startServerConsul(t *testing.T, dir string) *serverConsul {
	t.Helper()
	agents, err := agentsDir(env.root)
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 4)
	c := &serverConsul{bin: filepath.Join(agents, "consul"), dir: dir, port: ports[0], conf: filepath.Join(dir, "consul.hcl")}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	hcl := fmt.Sprintf(`node_name = "themis-faults"
data_dir = %q
server = true
bootstrap_expect = 1
bind_addr = "127.0.0.1"
client_addr = "127.0.0.1"
log_level = "WARN"
performance {
  raft_multiplier = 1 # Consul's production setting (the default, 5, is for dev machines)
}
ports {
  http = %d
  server = %d
  serf_lan = %d
  serf_wan = %d
  dns = -1
  grpc = -1
  grpc_tls = -1
}
`, filepath.Join(dir, "data"), ports[0], ports[1], ports[2], ports[3])
	if err := os.WriteFile(c.conf, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	c.start(t)
	t.Cleanup(func() { c.stop(t) })
	return c
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for range n {
		out = append(out, freePort(t))
	}
	return out
}

func (c *serverConsul) addr() string { return fmt.Sprintf("127.0.0.1:%d", c.port) }

// start runs the agent and waits until it has a leader.
func (c *serverConsul) start(t *testing.T) {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(c.dir, "consul.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(c.bin, "agent", "-config-file", c.conf)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.done = make(chan error, 1)
	go func(cmd *exec.Cmd) { c.done <- cmd.Wait(); log.Close() }(c.cmd)
	eventually(t, 60*time.Second, "the Consul server to lead", func() (bool, error) {
		resp, err := http.Get("http://" + c.addr() + "/v1/status/leader")
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		var b [128]byte
		n, _ := resp.Body.Read(b[:])
		return resp.StatusCode == 200 && strings.Contains(string(b[:n]), ":"), fmt.Errorf("leader %q", b[:n])
	})
}

// stop interrupts the agent (a graceful leave) and waits for it.
func (c *serverConsul) stop(t *testing.T) {
	t.Helper()
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
	c.cmd = nil
}

// watching runs the invariant watcher against a cluster until the test
// ends, and fails the test if it saw any violation. count says how many it
// has seen so far.
func watching(t *testing.T, ctx context.Context, nc *nomadapi.Client, cc *consulapi.Client) (count func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var seen []check.Violation
	passes, errs := 0, 0
	w := &check.Watcher{Reader: &check.Reader{Nomad: nc, Consul: cc}, Tolerances: check.DefaultTolerances,
		Report: func(v check.Violation) {
			mu.Lock()
			seen = append(seen, v)
			mu.Unlock()
		}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, err := w.Pass(ctx)
			mu.Lock()
			if err != nil {
				errs++
			} else {
				passes++
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		t.Logf("invariant watcher: %d snapshots checked, %d failed reads (agents down), %d violations", passes, errs, len(seen))
		for _, v := range seen {
			t.Errorf("invariant violated: %v", v)
		}
		if passes == 0 {
			t.Error("the invariant watcher never read the cluster")
		}
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
}

// Faults on the multi-node cluster, with the invariant watcher running
// throughout: Consul restarted (the planner waits and resumes; the leases
// persist and the running job keeps its lease), and a Nomad client
// restarted with its data dir (its task is re-adopted, nothing restarts).
// After each, the time until the cluster makes progress again (a job
// submitted meanwhile runs) is measured and logged; the goal is 10 s.
func TestFaultsConsulAndClientRestartUnderWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 5*time.Minute)
	defer cancel()
	began := time.Now()
	at := func() time.Duration { return time.Since(began).Round(time.Millisecond) }
	dir, err := os.MkdirTemp(env.work, "faults-")
	if err != nil {
		t.Fatal(err)
	}
	cs := startServerConsul(t, filepath.Join(dir, "consul"))
	cluster, err := devstack.StartCluster(ctx, devstack.Config{
		NomadBin: env.nomadBin, PluginDir: env.plugins, Templates: filepath.Join(env.root, "examples", "agents"),
		Topology: filepath.Join(env.root, "examples", "topology", "dev-cluster.hcl"),
		Nodes:    []string{"node-0", "node-1"},
		DataDir:  filepath.Join(dir, "nomad"), Ports: devstack.Ports{ConsulHTTP: cs.port},
		Log: env.log.Named("faults-cluster"),
	})
	if err != nil {
		t.Fatalf("start a server and 2 clients: %v", err)
	}
	t.Cleanup(cluster.Close)
	m := &multiCluster{cluster: cluster}
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address = cluster.NomadAddr()
	if m.nomad, err = nomadapi.NewClient(ncfg); err != nil {
		t.Fatal(err)
	}
	ccfg := consulapi.DefaultConfig()
	ccfg.Address = cs.addr()
	if m.consul, err = consulapi.NewClient(ccfg); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: Consul server, Nomad server and 2 clients up", at())
	watching(t, ctx, m.nomad, m.consul)
	m.runPlanner(t, ctx, stack.Of(policies.FIFO{}))

	submit := func(id string, gpus int) {
		t.Helper()
		job := trainJob{gpus: gpus, steps: 100000}.build(t, id)
		if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
		t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister(id, true, nil) })
	}
	waitRuns := func(id string, timeout time.Duration) *nomadapi.Allocation {
		t.Helper()
		var a *nomadapi.Allocation
		eventually(t, timeout, id+" to run", func() (bool, error) {
			var err error
			a, _, err = m.running(id)
			return a != nil, err
		})
		return a
	}
	// A fills one node; B takes half of the other.
	submit("faults-a", 8)
	a := waitRuns("faults-a", 60*time.Second)
	submit("faults-b", 4)
	b := waitRuns("faults-b", 60*time.Second)
	leaseA := m.lease(t, "faults-a")
	t.Logf("%s: faults-a runs on %s, faults-b on %s", at(), a.NodeName, b.NodeName)

	// Consul restarted, with a job submitted while it is down.
	cs.stop(t)
	t.Logf("%s: Consul stopped", at())
	submit("faults-c", 2)
	time.Sleep(2 * time.Second)
	restarted := time.Now()
	cs.start(t)
	up := time.Since(restarted)
	eventually(t, 60*time.Second, "faults-c to be granted", func() (bool, error) { return m.lease(t, "faults-c") != nil, nil })
	granted := time.Since(restarted)
	waitRuns("faults-c", 60*time.Second)
	progress := time.Since(restarted)
	t.Logf("%s: Consul restart: Consul leads again %s after it was started; faults-c (submitted while it was down) is granted after %s and runs %s after it was started",
		at(), up.Round(time.Millisecond), granted.Round(time.Millisecond), progress.Round(time.Millisecond))
	if l := m.lease(t, "faults-a"); l == nil || l.LeaseID != leaseA.LeaseID {
		t.Fatalf("faults-a's lease after the Consul restart: %+v, want lease %s", l, leaseA.LeaseID)
	}
	if as := allocsOf(t, m.nomad, "faults-a"); len(as) != 1 || as[0].ID != a.ID || as[0].ClientStatus != "running" {
		t.Fatalf("faults-a after the Consul restart: %d allocations, want its one allocation %s still running", len(as), a.ID)
	}
	if progress > 10*time.Second {
		t.Logf("NOTE: progress after the Consul restart took %s, over the 10 s goal", progress.Round(time.Millisecond))
	}

	// The Nomad client of faults-b restarted, with a job submitted while
	// it is down that only fits there.
	i := 0
	for j, n := range cluster.Nodes() {
		if n == b.NodeName {
			i = j
		}
	}
	if err := cluster.StopClient(i, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: Nomad client %s stopped", at(), b.NodeName)
	submit("faults-d", 2)
	time.Sleep(2 * time.Second)
	restarted = time.Now()
	if err := cluster.StartClient(ctx, i); err != nil {
		t.Fatal(err)
	}
	up = time.Since(restarted)
	d := waitRuns("faults-d", 60*time.Second)
	progress = time.Since(restarted)
	t.Logf("%s: client restart: node %s ready %s after the client was started; faults-d (submitted while it was down) runs on %s %s after",
		at(), b.NodeName, up.Round(time.Millisecond), d.NodeName, progress.Round(time.Millisecond))
	for _, id := range []string{"faults-a", "faults-b"} {
		as := allocsOf(t, m.nomad, id)
		if len(as) != 1 || as[0].ClientStatus != "running" {
			t.Fatalf("%s after the client restart: %d allocations (first %s), want its one allocation still running", id, len(as), as[0].ClientStatus)
		}
		full, _, err := m.nomad.Allocations().Info(as[0].ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		st := full.TaskStates["hello"]
		if starts := countEvents(st.Events, nomadapi.TaskStarted); starts != 1 || st.Restarts != 0 {
			t.Fatalf("%s after the client restart: %d starts, %d restarts; want 1 and 0", id, starts, st.Restarts)
		}
	}
	if progress > 10*time.Second {
		t.Logf("NOTE: progress after the client restart took %s, over the 10 s goal", progress.Round(time.Millisecond))
	}
}

func countEvents(evs []*nomadapi.TaskEvent, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}
