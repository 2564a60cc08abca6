package nodesim

import (
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/client/lib/idset"
	"github.com/hashicorp/nomad/client/lib/numalib"
	"github.com/hashicorp/nomad/client/lib/numalib/hw"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/nomad/structs"
	psstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/themis-nomad/themis/device"
	"github.com/themis-nomad/themis/device/topology"
)

// DriverName is the driver every simulated node offers (the themis task
// driver's name).
const DriverName = "themis"

// Each simulated node's CPU and memory: enough that Nomad's bin-packing
// never refuses a themis job for them (the planner decides by GPUs).
const (
	nodeCores    = 64
	nodeCoreMHz  = 3000
	nodeMemoryMB = 1 << 20
	nodeDiskMB   = 1 << 20
)

// node is one simulated Nomad client node.
type node struct {
	sim  *Sim
	name string
	node *structs.Node
	gpus map[string]bool // the node's device IDs

	mu sync.Mutex
	// token authenticates the node's RPCs: its signed identity once the
	// server gave one, else its secret ID.
	token string
	ttl   time.Duration
	// allocs are the allocations the node runs or ran, by ID.
	allocs map[string]*alloc
	// pending are the updates not yet sent, by allocation ID.
	pending map[string]*structs.Allocation
}

// alloc is one allocation as the node runs it.
type alloc struct {
	modifyIndex uint64
	job         jobKey
	tasks       []string
	started     time.Time
	timer       *time.Timer
	terminal    bool
	// last are the task states last queued, which the next update
	// starts from.
	last map[string]*structs.TaskState
}

func newNode(s *Sim, tn topology.Node) *node {
	groups := device.FingerprintGroups(&device.Inventory{Node: tn.Name, Rack: tn.Rack, GPUs: tn.GPUs}, device.BackendSim)
	n := &node{sim: s, name: tn.Name, gpus: map[string]bool{}, allocs: map[string]*alloc{}, pending: map[string]*structs.Allocation{}}
	var devices []*structs.NodeDeviceResource
	for _, g := range groups {
		d := &structs.NodeDeviceResource{Vendor: g.Vendor, Type: g.Type, Name: g.Name, Attributes: psstructs.CopyMapStringAttribute(g.Attributes)}
		for _, inst := range g.Devices {
			nd := &structs.NodeDevice{ID: inst.ID, Healthy: inst.Healthy, HealthDescription: inst.HealthDesc}
			if inst.HwLocality != nil {
				nd.Locality = &structs.NodeDeviceLocality{PciBusID: inst.HwLocality.PciBusID}
			}
			d.Instances = append(d.Instances, nd)
			n.gpus[inst.ID] = true
		}
		devices = append(devices, d)
	}
	cores := make([]numalib.Core, nodeCores)
	for i := range cores {
		cores[i] = numalib.Core{ID: hw.CoreID(i), Grade: numalib.Performance, BaseSpeed: nodeCoreMHz}
	}
	topo := &numalib.Topology{Distances: numalib.SLIT{[]numalib.Cost{10}}, Cores: cores}
	topo.SetNodes(idset.From[hw.NodeID]([]hw.NodeID{0}))
	sn := &structs.Node{
		ID:         uuid.Generate(),
		SecretID:   uuid.Generate(),
		Datacenter: s.cfg.Datacenter,
		Name:       tn.Name,
		HTTPAddr:   "127.0.0.1:0",
		NodePool:   s.cfg.NodePool,
		Attributes: map[string]string{
			"kernel.name": "linux", "os.name": "nodesim", "cpu.arch": "amd64",
			"nomad.version": "1.11.3", "unique.hostname": tn.Name,
			"driver." + DriverName: "1", "nodesim": "1",
		},
		Drivers: map[string]*structs.DriverInfo{
			DriverName: {Detected: true, Healthy: true, HealthDescription: "Healthy", UpdateTime: time.Now()},
		},
		NodeResources: &structs.NodeResources{
			Processors: structs.NodeProcessorResources{Topology: topo},
			Memory:     structs.NodeMemoryResources{MemoryMB: nodeMemoryMB},
			Disk:       structs.NodeDiskResources{DiskMB: nodeDiskMB},
			Devices:    devices,
			// Nomad's network checker wants the host network every group
			// has by default; no port is ever used.
			Networks: []*structs.NetworkResource{{Mode: "host", Device: "lo", IP: "127.0.0.1", CIDR: "127.0.0.1/32", MBits: 1000}},
			NodeNetworks: []*structs.NodeNetworkResource{{Mode: "host", Device: "lo", Speed: 1000,
				Addresses: []structs.NodeNetworkAddress{{Alias: "default", Address: "127.0.0.1", Family: structs.NodeNetworkAF_IPv4}}}},
			MinDynamicPort: 20000, MaxDynamicPort: 32000,
		},
		ReservedResources: &structs.NodeReservedResources{},
		Meta:              map[string]string{"rack": tn.Rack},
		Status:            structs.NodeStatusInit,
	}
	sn.NodeResources.Compatibility()
	_ = sn.ComputeClass()
	n.node = sn
	n.token = sn.SecretID
	return n
}

func (n *node) authToken() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.token
}

func (n *node) handleResponse(resp *structs.NodeUpdateResponse) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if resp.SignedIdentity != nil && *resp.SignedIdentity != "" {
		n.token = *resp.SignedIdentity
	}
	if resp.HeartbeatTTL > 0 {
		n.ttl = resp.HeartbeatTTL
	}
}

// register registers the node and marks it ready (its first heartbeat),
// as a client does on start.
func (n *node) register() error {
	req := structs.NodeRegisterRequest{Node: n.node, WriteRequest: structs.WriteRequest{Region: n.sim.cfg.Region}}
	var resp structs.NodeUpdateResponse
	if err := n.sim.rpc("Node.Register", &req, &resp); err != nil {
		return &nodeError{n.name, "register", err}
	}
	n.handleResponse(&resp)
	if err := n.heartbeat(); err != nil {
		return &nodeError{n.name, "first heartbeat", err}
	}
	return nil
}

type nodeError struct {
	node, what string
	err        error
}

func (e *nodeError) Error() string {
	return "nodesim: node " + e.node + ": " + e.what + ": " + e.err.Error()
}
func (e *nodeError) Unwrap() error { return e.err }

func (n *node) heartbeat() error {
	req := structs.NodeUpdateStatusRequest{NodeID: n.node.ID, Status: structs.NodeStatusReady,
		WriteRequest: structs.WriteRequest{Region: n.sim.cfg.Region, AuthToken: n.authToken()}}
	var resp structs.NodeUpdateResponse
	if err := n.sim.rpc("Node.UpdateStatus", &req, &resp); err != nil {
		return err
	}
	n.sim.stats.heartbeats.Add(1)
	n.handleResponse(&resp)
	return nil
}

// heartbeatLoop heartbeats once per TTL (a random 60-90% of it, so the
// nodes spread out), sooner again after a failure.
func (n *node) heartbeatLoop() {
	defer n.sim.wg.Done()
	for {
		n.mu.Lock()
		ttl := n.ttl
		n.mu.Unlock()
		if ttl <= 0 {
			ttl = 10 * time.Second
		}
		if !n.sim.sleep(jitter(ttl, 0.6)) {
			return
		}
		if err := n.heartbeat(); err != nil {
			if n.sim.ctx.Err() != nil {
				return
			}
			n.sim.cfg.Log.Warn("heartbeat failed", "node", n.name, "error", err)
			if strings.Contains(err.Error(), "not found") {
				_ = n.register()
			}
			n.sim.sleep(time.Second)
		}
	}
}

// watchLoop is the client's watchAllocations: a blocking query for the
// node's allocations and their modify indexes, then a pull of those that
// are new or changed.
func (n *node) watchLoop() {
	defer n.sim.wg.Done()
	var index uint64
	for n.sim.ctx.Err() == nil {
		req := structs.NodeSpecificRequest{NodeID: n.node.ID, SecretID: n.node.SecretID,
			QueryOptions: structs.QueryOptions{Region: n.sim.cfg.Region, MinQueryIndex: index, MaxQueryTime: 5 * time.Minute,
				AllowStale: index > 0, AuthToken: n.authToken()}}
		var resp structs.NodeClientAllocsResponse
		if err := n.sim.rpc("Node.GetClientAllocs", &req, &resp); err != nil {
			if n.sim.ctx.Err() != nil {
				return
			}
			n.sim.cfg.Log.Warn("get allocations failed", "node", n.name, "error", err)
			n.sim.sleep(time.Second)
			continue
		}
		if resp.Index <= index {
			continue
		}
		index = resp.Index
		n.sim.stats.allocQueries.Add(1)
		var pull []string
		var pullIndex uint64
		gone := 0
		n.mu.Lock()
		for id, mi := range resp.Allocs {
			if a, ok := n.allocs[id]; !ok || mi > a.modifyIndex {
				pull = append(pull, id)
				pullIndex = max(pullIndex, mi)
			}
		}
		for id, a := range n.allocs {
			if _, ok := resp.Allocs[id]; !ok {
				// Garbage-collected by the server.
				if a.timer != nil {
					a.timer.Stop()
				}
				delete(n.allocs, id)
				gone++
			}
		}
		n.mu.Unlock()
		if len(pull) == 0 {
			if gone == 0 {
				n.sim.stats.idleWakes.Add(1)
			}
			continue
		}
		areq := structs.AllocsGetRequest{AllocIDs: pull,
			QueryOptions: structs.QueryOptions{Region: n.sim.cfg.Region, MinQueryIndex: pullIndex - 1, AllowStale: true, AuthToken: n.authToken()}}
		var aresp structs.AllocsGetResponse
		if err := n.sim.rpc("Alloc.GetAllocs", &areq, &aresp); err != nil {
			if n.sim.ctx.Err() != nil {
				return
			}
			n.sim.cfg.Log.Warn("pull allocations failed", "node", n.name, "error", err)
			index = 0 // ask again
			n.sim.sleep(time.Second)
			continue
		}
		for _, a := range aresp.Allocs {
			a.Canonicalize()
			n.update(a)
		}
	}
}

// update handles a new or changed allocation.
func (n *node) update(sa *structs.Allocation) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a, known := n.allocs[sa.ID]
	if known {
		a.modifyIndex = sa.AllocModifyIndex
	}
	stop := sa.ServerTerminalStatus() || sa.DesiredStatus != structs.AllocDesiredStatusRun
	switch {
	case !known && (stop || sa.ClientTerminalStatus()):
		// Never ran here: report it stopped unless it already is.
		n.allocs[sa.ID] = &alloc{modifyIndex: sa.AllocModifyIndex, terminal: true}
		if !sa.ClientTerminalStatus() {
			n.queue(sa.ID, structs.AllocClientStatusComplete, "stopped before it started", taskNames(sa), stateKilled(time.Time{}, time.Now()))
			n.sim.stats.stopped.Add(1)
		}
	case !known:
		n.start(sa)
	case stop && !a.terminal:
		n.finish(sa.ID, a, false)
	}
}

// start runs a new allocation: running now, complete after its duration
// (less what the job's earlier allocations ran).
func (n *node) start(sa *structs.Allocation) {
	now := time.Now()
	a := &alloc{modifyIndex: sa.AllocModifyIndex, job: jobKey{sa.Namespace, sa.JobID}, tasks: taskNames(sa), started: now}
	n.allocs[sa.ID] = a
	if bad := n.foreignDevices(sa); bad != "" {
		a.terminal = true
		n.sim.stats.failed.Add(1)
		n.queue(sa.ID, structs.AllocClientStatusFailed, bad, a.tasks, func(ts *structs.TaskState) {
			ts.State, ts.Failed, ts.StartedAt, ts.FinishedAt = structs.TaskStateDead, true, time.Time{}, now
			ts.Events = []*structs.TaskEvent{structs.NewTaskEvent(structs.TaskDriverFailure).SetDriverError(errorString(bad)).SetFailsTask()}
		})
		return
	}
	n.sim.stats.started.Add(1)
	n.queue(sa.ID, structs.AllocClientStatusRunning, "Tasks are running", a.tasks, func(ts *structs.TaskState) {
		ts.State, ts.StartedAt = structs.TaskStateRunning, now
		ts.Events = []*structs.TaskEvent{structs.NewTaskEvent(structs.TaskReceived), structs.NewTaskEvent(structs.TaskStarted)}
	})
	d, ok := Duration(sa)
	if !ok {
		d = n.sim.cfg.DefaultDuration
	}
	if d <= 0 {
		return // runs until stopped
	}
	left := max(d-n.sim.ranSoFar(a.job), 0)
	id := sa.ID
	a.timer = time.AfterFunc(left, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if a.terminal || n.sim.ctx.Err() != nil {
			return
		}
		n.finish(id, a, true)
	})
}

// finish reports a running allocation complete: it ran its course (done)
// or the server stopped it.
func (n *node) finish(id string, a *alloc, done bool) {
	now := time.Now()
	a.terminal = true
	if a.timer != nil {
		a.timer.Stop()
	}
	if done {
		n.sim.forgetRan(a.job)
		n.sim.stats.completed.Add(1)
		n.queue(id, structs.AllocClientStatusComplete, "All tasks have completed", a.tasks, func(ts *structs.TaskState) {
			ts.State, ts.FinishedAt = structs.TaskStateDead, now
			ts.Events = append(ts.Events, structs.NewTaskEvent(structs.TaskTerminated).SetExitCode(0))
		})
		return
	}
	n.sim.addRan(a.job, now.Sub(a.started))
	n.sim.stats.stopped.Add(1)
	n.queue(id, structs.AllocClientStatusComplete, "All tasks have completed", a.tasks, stateKilled(a.started, now))
}

func stateKilled(started, now time.Time) func(ts *structs.TaskState) {
	return func(ts *structs.TaskState) {
		ts.State, ts.FinishedAt = structs.TaskStateDead, now
		if !started.IsZero() {
			ts.StartedAt = started
		}
		ts.Events = append(ts.Events, structs.NewTaskEvent(structs.TaskKilled))
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// queue records an update of the allocation's client status and its
// tasks' states (set changes each task's state from the last one sent),
// sent with the node's next sync.
func (n *node) queue(id, status, desc string, tasks []string, set func(*structs.TaskState)) {
	u := n.pending[id]
	if u == nil {
		u = &structs.Allocation{ID: id, NodeID: n.node.ID, TaskStates: map[string]*structs.TaskState{}}
		if a := n.allocs[id]; a != nil && a.last != nil {
			for t, ts := range a.last {
				u.TaskStates[t] = ts.Copy()
			}
		}
		n.pending[id] = u
	}
	u.ClientStatus, u.ClientDescription = status, desc
	for _, t := range tasks {
		ts := u.TaskStates[t]
		if ts == nil {
			ts = &structs.TaskState{State: structs.TaskStatePending}
			u.TaskStates[t] = ts
		}
		set(ts)
	}
	if a := n.allocs[id]; a != nil {
		a.last = u.TaskStates
	}
}

// sync sends the node's pending updates in one Node.UpdateAlloc; on
// failure they are kept for the next sync.
func (n *node) sync() {
	n.mu.Lock()
	if len(n.pending) == 0 {
		n.mu.Unlock()
		return
	}
	batch := make([]*structs.Allocation, 0, len(n.pending))
	for _, u := range n.pending {
		batch = append(batch, u)
	}
	n.pending = map[string]*structs.Allocation{}
	n.mu.Unlock()
	req := structs.AllocUpdateRequest{Alloc: batch, WriteRequest: structs.WriteRequest{Region: n.sim.cfg.Region, AuthToken: n.authToken()}}
	var resp structs.GenericResponse
	if err := n.sim.rpc("Node.UpdateAlloc", &req, &resp); err != nil {
		if n.sim.ctx.Err() != nil {
			return
		}
		n.sim.cfg.Log.Warn("update allocations failed", "node", n.name, "error", err)
		n.mu.Lock()
		for _, u := range batch {
			if _, newer := n.pending[u.ID]; !newer {
				n.pending[u.ID] = u
			}
		}
		n.mu.Unlock()
	}
}

func (n *node) stopTimers() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range n.allocs {
		if a.timer != nil {
			a.timer.Stop()
		}
	}
}

// foreignDevices says which of the devices Nomad gave the allocation are
// not this node's ("" when all are): the device plugin's Reserve would
// refuse them.
func (n *node) foreignDevices(sa *structs.Allocation) string {
	if sa.AllocatedResources == nil {
		return ""
	}
	var bad []string
	for _, tr := range sa.AllocatedResources.Tasks {
		for _, d := range tr.Devices {
			for _, id := range d.DeviceIDs {
				if !n.gpus[id] {
					bad = append(bad, id)
				}
			}
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "nodesim: devices not on node " + n.name + ": " + strings.Join(bad, ",")
}

// taskNames are the allocation's group's tasks.
func taskNames(sa *structs.Allocation) []string {
	if sa.Job == nil {
		return nil
	}
	tg := sa.Job.LookupTaskGroup(sa.TaskGroup)
	if tg == nil {
		return nil
	}
	out := make([]string, 0, len(tg.Tasks))
	for _, t := range tg.Tasks {
		out = append(out, t.Name)
	}
	return out
}
