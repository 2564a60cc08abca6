// Package nodesim runs many simulated Nomad client nodes in one process.
//
// Each node speaks to a real Nomad server over its RPC port as a client
// agent does: it registers with the themis GPUs the device plugin would
// fingerprint for its node of a topology file, heartbeats, watches its
// allocations and reports their tasks running and, after the job's
// duration, complete; a stopped allocation's run time is kept, so the next
// one runs only the rest. No task is started: no drivers, no lease
// check, no logs. Start runs a Sim of a Config's nodes; Cluster and HCL
// make a topology of n 8-GPU nodes. What it sends, what it does not
// simulate, and what 1,000 nodes cost: docs/scale.md, "The node simulator".
package nodesim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/helper/pool"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/yamux"

	"github.com/themis-nomad/themis/device/topology"
)

// Config says which nodes to simulate and where the server is.
type Config struct {
	// Server is the Nomad server's RPC address (host:port).
	Server string
	// Region and Datacenter of the nodes (default "global", "dc1").
	Region, Datacenter string
	// NodePool the nodes register in (default "default").
	NodePool string
	// Topology is the cluster's topology (a topology file, parsed); every
	// node of it is simulated unless Nodes names some.
	Topology *topology.Topology
	// Nodes, when set, are the names of the topology's nodes to simulate.
	Nodes []string
	// DefaultDuration is how long a task runs when neither its meta nor
	// its command says (Duration); 0: until it is stopped.
	DefaultDuration time.Duration
	// Registrations is how many nodes register at once (default 16).
	Registrations int
	// SyncInterval is how often a node's allocation updates are sent
	// (default 200 ms, the Nomad client's allocSyncIntv).
	SyncInterval time.Duration
	Log          hclog.Logger
}

// Sim is a running set of simulated nodes.
type Sim struct {
	cfg    Config
	pool   *pool.ConnPool
	addr   net.Addr
	nodes  []*node
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// ran is how long each job's earlier allocations ran before they were
	// stopped: the job's checkpointed progress.
	mu  sync.Mutex
	ran map[jobKey]time.Duration

	stats counters
}

type jobKey struct{ namespace, id string }

type counters struct {
	rpcs, rpcErrors, heartbeats, started, completed, stopped, failed atomic.Int64
	allocQueries, idleWakes                                          atomic.Int64
}

// Stats are what the simulator did so far.
type Stats struct {
	Nodes int
	// RPCs are the calls made to the server, RPCErrors those that failed.
	RPCs, RPCErrors int64
	Heartbeats      int64
	// Started are allocations reported running; Completed those that ran
	// their duration; Stopped those the server stopped; Failed those
	// refused (devices not of the node).
	Started, Completed, Stopped, Failed int64
	// AllocQueries are the nodes' blocking queries for their allocations
	// (Node.GetClientAllocs) that returned with a new index; IdleWakes
	// those of them that brought the node nothing new, changed or gone.
	// Nomad answers a node with no allocation with the allocations
	// table's index, so a write to any allocation anywhere wakes it, as it
	// wakes a real client; a node's own status reports raise its index
	// too, with nothing to pull.
	AllocQueries, IdleWakes int64
}

// Start registers every node with the server, then keeps them alive and
// runs their allocations until ctx ends or Close. It returns once every
// node registered and heartbeated once, or with the first error.
func Start(ctx context.Context, cfg Config) (*Sim, error) {
	if cfg.Topology == nil || len(cfg.Topology.Nodes) == 0 {
		return nil, errors.New("nodesim: no topology nodes")
	}
	if cfg.Server == "" {
		return nil, errors.New("nodesim: no server address")
	}
	if cfg.Region == "" {
		cfg.Region = "global"
	}
	if cfg.Datacenter == "" {
		cfg.Datacenter = "dc1"
	}
	if cfg.NodePool == "" {
		cfg.NodePool = structs.NodePoolDefault
	}
	if cfg.Registrations <= 0 {
		cfg.Registrations = 16
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 200 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	addr, err := net.ResolveTCPAddr("tcp", cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("nodesim: server address %q: %w", cfg.Server, err)
	}
	want := map[string]bool{}
	for _, n := range cfg.Nodes {
		want[n] = true
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &Sim{
		cfg: cfg, addr: addr, ctx: sctx, cancel: cancel, ran: map[jobKey]time.Duration{},
		// One TCP connection, one yamux stream per call in flight: a
		// blocking query per node is a stream each.
		pool: pool.NewPool(cfg.Log.Named("pool"), 0, 64, nil, yamux.DefaultConfig()),
	}
	for _, tn := range cfg.Topology.Nodes {
		if len(want) > 0 && !want[tn.Name] {
			continue
		}
		s.nodes = append(s.nodes, newNode(s, tn))
	}
	if len(s.nodes) == 0 {
		cancel()
		return nil, fmt.Errorf("nodesim: none of the nodes %v is in topology %q", cfg.Nodes, cfg.Topology.File)
	}
	if err := s.registerAll(); err != nil {
		s.Close()
		return nil, err
	}
	for _, n := range s.nodes {
		s.wg.Add(2)
		go n.heartbeatLoop()
		go n.watchLoop()
	}
	s.wg.Add(1)
	go s.syncLoop()
	return s, nil
}

// registerAll registers the nodes, cfg.Registrations at a time.
func (s *Sim) registerAll() error {
	sem := make(chan struct{}, s.cfg.Registrations)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for _, n := range s.nodes {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := n.register(); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// Close stops every node's loops (the nodes stay registered; the server
// marks them down once their heartbeats stop) and closes the connection.
func (s *Sim) Close() {
	s.cancel()
	for _, n := range s.nodes {
		n.stopTimers()
	}
	_ = s.pool.Shutdown()
	s.wg.Wait()
}

// NodeIDs maps each simulated node's name to its Nomad node ID.
func (s *Sim) NodeIDs() map[string]string {
	out := make(map[string]string, len(s.nodes))
	for _, n := range s.nodes {
		out[n.name] = n.node.ID
	}
	return out
}

// Stats are the simulator's counters.
func (s *Sim) Stats() Stats {
	c := &s.stats
	return Stats{
		Nodes: len(s.nodes), RPCs: c.rpcs.Load(), RPCErrors: c.rpcErrors.Load(), Heartbeats: c.heartbeats.Load(),
		Started: c.started.Load(), Completed: c.completed.Load(), Stopped: c.stopped.Load(), Failed: c.failed.Load(),
		AllocQueries: c.allocQueries.Load(), IdleWakes: c.idleWakes.Load(),
	}
}

// rpc calls method on the server.
func (s *Sim) rpc(method string, args, reply any) error {
	s.stats.rpcs.Add(1)
	err := s.pool.RPC(s.cfg.Region, s.addr, method, args, reply)
	if err != nil {
		s.stats.rpcErrors.Add(1)
	}
	return err
}

// syncLoop sends each node's pending allocation updates, one
// Node.UpdateAlloc per node that has some, every SyncInterval.
func (s *Sim) syncLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range s.nodes {
			n.sync()
		}
	}
}

// sleep waits d or until the sim stops; false when it stopped.
func (s *Sim) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jitter is d scaled by a random factor in [lo, 1).
func jitter(d time.Duration, lo float64) time.Duration {
	return time.Duration(float64(d) * (lo + (1-lo)*rand.Float64()))
}

// takeRan returns and forgets how long the job's stopped allocations ran.
func (s *Sim) ranSoFar(k jobKey) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ran[k]
}

func (s *Sim) addRan(k jobKey, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran[k] += d
}

func (s *Sim) forgetRan(k jobKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ran, k)
}
