package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// multiCluster is a Nomad server and three Nomad clients on this machine,
// each client one node of examples/topology/dev-cluster.hcl, with a Consul
// and an in-process planner of their own (a planner sharing the suite's
// Consul would fight the suite's planner over the same keys).
type multiCluster struct {
	cluster *devstack.Cluster
	nomad   *nomadapi.Client
	consul  *consulapi.Client
	// consulAddr is Consul's HTTP address.
	consulAddr string
}

var clusterRacks = map[string]string{"node-0": "rack0", "node-1": "rack0", "node-2": "rack1"}

func startMultiCluster(t testing.TB, ctx context.Context) *multiCluster {
	t.Helper()
	cs, cluster := startConsulCluster(t, ctx, "multi-cluster", []string{"node-0", "node-1", "node-2"}, false)
	m := &multiCluster{cluster: cluster, consulAddr: cs.ConsulAddr()}
	m.nomad, m.consul = apiClients(t, cluster.NomadAddr(), cs.ConsulAddr(), "")
	return m
}

// startConsulCluster starts a Consul of its own, then a Nomad server and
// one client per node (nodes of examples/topology/dev-cluster.hcl) that use
// it, with ACLs on in all of them when acl is set (`themis dev [-acl]
// -clients N`); both stop when the test ends. name names the data dir and
// the logs.
func startConsulCluster(t testing.TB, ctx context.Context, name string, nodes []string, acl bool) (*devstack.Stack, *devstack.Cluster) {
	t.Helper()
	agents, err := agentsDir(env.root)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(env.work, name+"-")
	if err != nil {
		t.Fatal(err)
	}
	templates := filepath.Join(env.root, "examples", "agents")
	cs, err := devstack.StartConsul(ctx, devstack.Config{
		ConsulBin: filepath.Join(agents, "consul"), Templates: templates, DataDir: filepath.Join(dir, "consul"),
		ACL: acl, Log: env.log.Named(name + "-consul"),
	})
	if err != nil {
		t.Fatalf("start Consul (ACLs %v): %v", acl, err)
	}
	t.Cleanup(func() {
		cs.Stop()
		if !t.Failed() && os.Getenv("THEMIS_E2E_KEEP") == "" {
			os.RemoveAll(dir)
		}
	})
	_, port, _ := net.SplitHostPort(cs.ConsulAddr())
	consulPort, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	cfg := devstack.Config{
		NomadBin: env.nomadBin, PluginDir: env.plugins, Templates: templates,
		Topology: filepath.Join(env.root, "examples", "topology", "dev-cluster.hcl"),
		Nodes:    nodes,
		DataDir:  filepath.Join(dir, "nomad"), Ports: devstack.Ports{ConsulHTTP: consulPort},
		Log: env.log.Named(name),
	}
	if acl {
		cfg.ACL, cfg.ACLTokens = true, cs.Tokens()
	}
	cluster, err := devstack.StartCluster(ctx, cfg)
	if err != nil {
		t.Fatalf("start a server and %d clients (ACLs %v): %v", len(nodes), acl, err)
	}
	t.Cleanup(cluster.Close)
	return cs, cluster
}

// apiClients are Nomad and Consul API clients at the given addresses, with
// token as both agents' token ("" for none).
func apiClients(t testing.TB, nomadAddr, consulAddr, token string) (*nomadapi.Client, *consulapi.Client) {
	t.Helper()
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address, ncfg.SecretID = nomadAddr, token
	nc, err := nomadapi.NewClient(ncfg)
	if err != nil {
		t.Fatal(err)
	}
	ccfg := consulapi.DefaultConfig()
	ccfg.Address, ccfg.Token = consulAddr, token
	cc, err := consulapi.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	return nc, cc
}

// runPlanner runs a planner with st (the stack of `themis planner`'s
// -policy and -vc-config) against the cluster until the test ends.
func (m *multiCluster) runPlanner(t *testing.T, ctx context.Context, st *stack.Stack, opts ...func(*planner.Config)) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cfg := planner.Config{
		Nomad: nomad.NewClient(m.nomad, "", env.log.Named("multi-nomad")), Store: consul.NewStore(m.consul),
		Stack: st, Resync: 5 * time.Second,
		MaxKillTimeout: 30 * time.Minute, RestoreGuard: 5 * time.Second, Log: env.log.Named("multi-planner"),
	}
	for _, o := range opts {
		o(&cfg)
	}
	p := planner.New(cfg)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("planner: %v", err)
		}
	})
	eventually(t, 30*time.Second, "the planner's pending node pool", func() (bool, error) {
		pool, _, err := m.nomad.NodePools().Info(nomad.DefaultPendingPool, nil)
		return err == nil && pool != nil, err
	})
}

func (m *multiCluster) lease(t *testing.T, id string) *lease.JobLease {
	t.Helper()
	return readKV[lease.JobLease](t, m.consul, lease.JobKey("default", id))
}

// running returns the job's running allocation once hello printed the GPUs
// it sees and a step, with what it printed.
func (m *multiCluster) running(id string) (*nomadapi.Allocation, string, error) {
	as, _, err := m.nomad.Jobs().Allocations(id, false, nil)
	if err != nil {
		return nil, "", err
	}
	for _, stub := range as {
		if stub.ClientStatus != "running" {
			continue
		}
		a, _, err := m.nomad.Allocations().Info(stub.ID, nil)
		if err != nil {
			return nil, "", err
		}
		out, err := catStdout(m.nomad, a)
		if err != nil {
			return nil, "", err
		}
		if visibleRE.MatchString(out) && stepRE.MatchString(out) {
			return a, out, nil
		}
	}
	return nil, "", fmt.Errorf("%s: no running allocation that printed its GPUs yet", id)
}

// TestMultiClientCluster brings up the multi-node dev cluster (one Nomad
// server, three Nomad clients, two racks) and runs a planner against it:
// the planner sees every client as a node of its rack with its 8 GPUs, and
// three 8-GPU jobs run at once, one on each node, each on exactly the GPUs
// its lease names (the pin: Nomad's device IDs and what the task sees).
// Stopping the cluster's tasks (what Close does before it stops the agents)
// checkpoints and stops all three.
func TestMultiClientCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 3*time.Minute)
	defer cancel()
	began := time.Now()
	m := startMultiCluster(t, ctx)
	t.Logf("%s: server and 3 clients up", time.Since(began).Round(time.Millisecond))

	snap, err := nomad.NewClient(m.nomad, "", env.log.Named("multi-nomad")).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range snap.Nodes {
		if want, ok := clusterRacks[n.Name]; !ok || n.Rack != want || len(n.GPUs) != 8 || !n.Schedulable {
			t.Errorf("node %s: rack %q, %d GPUs, schedulable %v; want a node of dev-cluster.hcl, rack %q, 8 GPUs, schedulable",
				n.Name, n.Rack, len(n.GPUs), n.Schedulable, want)
		}
		seen[n.Name] = true
	}
	if len(snap.Nodes) != 3 || len(seen) != 3 {
		t.Fatalf("the planner sees %d nodes (%v), want node-0, node-1 and node-2", len(snap.Nodes), seen)
	}

	m.runPlanner(t, ctx, stack.Of(policies.FIFO{}))
	ids := []string{"multi-a", "multi-b", "multi-c"}
	// FIFO grants whole nodes to 8-GPU jobs: all three can only run at once
	// on three different nodes.
	for _, id := range ids {
		job := trainJob{gpus: 8, steps: 600}.build(t, id)
		if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
		t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister(id, true, nil) })
	}
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for {
		nodes := map[string]string{}
		last = nil
		for _, id := range ids {
			a, out, err := m.running(id)
			if err != nil {
				last = err
				break
			}
			l := m.lease(t, id)
			if l == nil {
				t.Fatalf("%s runs on %s without a lease", id, a.NodeID)
			}
			checkPinned(t, id, a, out, l)
			if other, dup := nodes[a.NodeID]; dup {
				t.Fatalf("%s and %s run on one node %s", other, id, a.NodeID)
			}
			nodes[a.NodeID] = id
		}
		if last == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the three 8-GPU jobs do not all run after 60s: %v", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s: three 8-GPU jobs run at once, one per node", time.Since(began).Round(time.Millisecond))

	// What Close (and Ctrl-C in `themis dev -clients N`) does first: a
	// client that is not -dev would leave its tasks running when it stops.
	if err := m.cluster.StopTasks(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		as, _, err := m.nomad.Jobs().Allocations(id, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, stub := range as {
			a, _, err := m.nomad.Allocations().Info(stub.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.ClientStatus == "running" || a.ClientStatus == "pending" {
				t.Fatalf("%s: allocation %s still %s after StopTasks", id, a.ID, a.ClientStatus)
			}
			if out := taskOutput(t, m.nomad, a); stepOf(checkpointedRE, out) < 0 {
				t.Fatalf("%s: hello did not checkpoint when its node was drained:\n%s", id, out)
			}
		}
	}
	t.Logf("%s: every task checkpointed and stopped", time.Since(began).Round(time.Millisecond))
}

func taskOutput(t *testing.T, nomad *nomadapi.Client, a *nomadapi.Allocation) string {
	t.Helper()
	out, err := catStdout(nomad, a)
	if err != nil {
		t.Fatalf("stdout of %s: %v", a.ID, err)
	}
	return out
}

// checkPinned: the allocation runs on the leased node with exactly the
// leased GPUs, as Nomad's device allocation and as the task sees them.
func checkPinned(t *testing.T, id string, a *nomadapi.Allocation, stdout string, l *lease.JobLease) {
	t.Helper()
	if a.NodeID != l.NodeID || clusterRacks[l.NodeName] == "" {
		t.Fatalf("%s runs on node %s; its lease names node %s (%s)", id, a.NodeID, l.NodeID, l.NodeName)
	}
	want := slices.Sorted(slices.Values(l.GPUs))
	if len(want) != 8 {
		t.Fatalf("%s: lease of %d GPUs, want 8: %v", id, len(want), want)
	}
	for _, g := range want {
		if !strings.HasPrefix(g, "SIM-"+l.NodeName+"-") {
			t.Fatalf("%s: leased GPU %s is not a GPU of node %s", id, g, l.NodeName)
		}
	}
	var got []string
	if tr := a.AllocatedResources; tr != nil && tr.Tasks["hello"] != nil {
		for _, d := range tr.Tasks["hello"].Devices {
			got = append(got, d.DeviceIDs...)
		}
	}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Fatalf("%s: Nomad allocated GPUs %v, its lease names %v", id, got, want)
	}
	checkSeesLeased(t, id+": the task", stdout, want)
}
