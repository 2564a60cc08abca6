package nomad

import (
	"github.com/themis-nomad/themis/planner/aclhint"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomadread"
)

// DefaultPendingPool is the node pool in which themis jobs wait for a grant.
// It has no nodes, so Nomad keeps a job there pending (blocked) until the
// planner moves it to its node's pool and pins it to its GPUs. This is the
// gate that keeps a themis job from starting before it is granted.
const DefaultPendingPool = "themis-pending"

// Client reads and writes Nomad for the planner.
type Client struct {
	api         *api.Client
	log         hclog.Logger
	pendingPool string
	jobs        map[core.JobKey]cachedJob
	foreign     ForeignCheckpoints
	// lists are Nomad's lists as last read (lists.go), parsed the nodes
	// by ID with the stub's ModifyIndex they were parsed at.
	lists  lists
	parsed map[string]parsedNode
	// marks follow the tables' indexes for ChangeMark (marks.go).
	marks marks
	// stopOnClientAfter is the pins' stop_on_client_after (disconnect.go).
	stopOnClientAfter time.Duration
}

// SetForeignCheckpoints says where tasks of other drivers keep their
// checkpoints (foreign.go); DefaultForeignCheckpoints otherwise.
func (c *Client) SetForeignCheckpoints(f ForeignCheckpoints) {
	d := DefaultForeignCheckpoints()
	if f.Root == "" {
		f.Root = d.Root
	}
	c.foreign = f
}

type cachedJob struct {
	// modifyIndex is the JobModifyIndex the job was listed at when read,
	// stubIndex the stub's ModifyIndex.
	modifyIndex, stubIndex uint64
	job                    *Job // nil: not a themis job
}

// heldMoved reports whether a cached job whose themis group is at count 0 (a held
// job) changed without a new definition: a version tag set or removed
// (hold.go) raises only the stub's ModifyIndex. Such a job has no
// allocations whose comings and goings would raise it too, so it is read
// again only when that happens.
func (cj cachedJob) heldMoved(lj listedJob) bool {
	return cj.job != nil && cj.job.Count() == 0 && cj.stubIndex != lj.modifyIndex
}

// NewClient wraps a Nomad API client.
func NewClient(c *api.Client, pendingPool string, log hclog.Logger) *Client {
	if pendingPool == "" {
		pendingPool = DefaultPendingPool
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Client{api: c, log: log, pendingPool: pendingPool, jobs: map[core.JobKey]cachedJob{}, foreign: DefaultForeignCheckpoints()}
}

// PendingPool is the name of the pool where themis jobs wait.
func (c *Client) PendingPool() string { return c.pendingPool }

// EnsurePendingPool creates the pending node pool if it does not exist.
func (c *Client) EnsurePendingPool(ctx context.Context) error {
	_, err := c.api.NodePools().Register(&api.NodePool{
		Name:        c.pendingPool,
		Description: "themis jobs wait here until the themis planner grants their GPUs; no node belongs to it",
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return denied(fmt.Errorf("create node pool %q: %w", c.pendingPool, err), "create node pool "+c.pendingPool,
			`node_pool "`+c.pendingPool+`" { policy = "write" }`)
	}
	return nil
}

// Snapshot is what Nomad knows, in the planner's terms.
type Snapshot struct {
	Nodes []core.Node
	// Pools maps node ID to the node's pool, for moving a granted job there.
	Pools map[string]string
	Jobs  []*Job
	// Allocs are the allocations of the themis jobs, terminal ones included
	// until Nomad garbage-collects them.
	Allocs map[core.JobKey][]Alloc
	// Unreadable are the jobs Nomad lists whose definition could not be
	// read or decoded, each with why (nomadread.Unreadable): the planner
	// sets them aside this round and decides every other job as usual.
	Unreadable map[core.JobKey]string
}

// Snapshot lists nodes with themis GPUs and jobs with a themis task. Nodes,
// job stubs and allocations are listed again only when their table's index
// moved (lists.go), nodes parsed again only when their ModifyIndex
// changed and full jobs fetched only when their definition did
// (JobModifyIndex: a job whose status alone changed keeps its definition),
// so a round where nothing changed reads three indexes, not the cluster.
func (c *Client) Snapshot(ctx context.Context) (*Snapshot, error) {
	full := c.lists.fullNow()
	nodes, err := c.listNodes(ctx, full)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Pools: map[string]string{}}
	for _, n := range nodes {
		node, ok, err := c.nodeFromNomad(n)
		if err != nil {
			c.log.Warn("ignoring node with a malformed themis fingerprint", "node", n.Name, "error", err)
			continue
		}
		if ok {
			s.Nodes = append(s.Nodes, node)
			s.Pools[n.ID] = n.NodePool
		}
	}
	// Nomad lists nodes by ID; the map does not keep an order.
	slices.SortFunc(s.Nodes, func(a, b core.Node) int { return strings.Compare(a.ID, b.ID) })
	order, listed, err := c.listJobs(ctx, full)
	if err != nil {
		return nil, err
	}
	for k := range c.jobs {
		if _, ok := listed[k]; !ok {
			delete(c.jobs, k)
		}
	}
	// The jobs whose definition changed since they were read (or that
	// are new) are read again, several at once; the others keep their
	// definition and take their stub's status.
	var stale []core.JobKey
	for _, key := range order {
		if cj, ok := c.jobs[key]; !ok || cj.modifyIndex != listed[key].jobModifyIndex || cj.heldMoved(listed[key]) {
			stale = append(stale, key)
		}
	}
	read := c.readJobs(ctx, stale)
	var gone []core.JobKey
	for _, key := range order {
		lj := listed[key]
		cj := c.jobs[key]
		if r, ok := read[key]; ok {
			var bad *nomadread.Unreadable
			switch {
			case errors.Is(r.err, nomadread.ErrGone):
				gone = append(gone, key) // deregistered since the list
				delete(c.jobs, key)
				continue
			case errors.As(r.err, &bad):
				// This job alone: set aside, read again next round
				// (it has no cache entry, so it is read again even if
				// its stub does not change).
				if s.Unreadable == nil {
					s.Unreadable = map[core.JobKey]string{}
				}
				s.Unreadable[key] = bad.Error()
				delete(c.jobs, key)
				continue
			case r.err != nil:
				return nil, r.err
			}
			cj = cachedJob{modifyIndex: lj.jobModifyIndex, stubIndex: lj.modifyIndex, job: r.job}
			c.jobs[key] = cj
		} else if cj.job != nil && deref(cj.job.Job.Status) != lj.status {
			cj.job = cj.job.withStatus(lj.status)
			c.jobs[key] = cj
		}
		if cj.job != nil {
			s.Jobs = append(s.Jobs, cj.job)
		}
	}
	for _, k := range gone {
		c.lists.forgetJob(k)
	}
	byKey := make(map[core.JobKey]*Job, len(s.Jobs))
	for _, j := range s.Jobs {
		byKey[j.Key] = j
	}
	if s.Allocs, err = c.allocations(ctx, byKey, full); err != nil {
		return nil, err
	}
	return s, nil
}

// ErrJobChanged means the job changed in Nomad since the planner read it; the
// next round sees the new version.
var ErrJobChanged = errors.New("job changed since it was read")

// Pin moves a granted job to its nodes' pool and constrains it to the
// nodes and the leased GPUs, check-and-set on the JobModifyIndex the planner
// saw. A one-node lease pins the group to its node; a multi-node gang's
// lease (one part per node, equal GPUs) runs the group with count = parts,
// one allocation per node (distinct_hosts), each node's allocation taking
// that node's leased GPUs (device IDs are unique across nodes, so one
// set_contains_any constraint over all of them selects exactly the part's
// GPUs on each node). A suspended job gets its group count back (1, or the
// gang's parts), so Nomad places it again. The task's kill_timeout becomes
// the stanza's grace period (Nomad caps it at the client's
// max_kill_timeout), its disconnect block stops it on a client cut off
// from the servers for StopOnClientAfter() (disconnect.go), and restarts (how
// many times the job was preempted) reaches the task as
// THEMIS_RESTART_COUNT. The job keeps no device request but the leased
// GPUs' (rewrite), its Nomad priority becomes PinPriority and every task
// but the themis task gets NVIDIA_VISIBLE_DEVICES=void (jobshape.go).
func (c *Client) Pin(ctx context.Context, j *Job, l lease.JobLease, pool string, restarts int) error {
	return c.edit(ctx, j, "pin", c.pinChange(j, l, pool, restarts))
}

// pinChange is what Pin changes in the job.
func (c *Client) pinChange(j *Job, l lease.JobLease, pool string, restarts int) func(job *api.Job, tg *api.TaskGroup, task *api.Task) {
	parts := l.Nodes()
	return func(job *api.Job, tg *api.TaskGroup, task *api.Task) {
		job.NodePool = &pool
		prio := PinPriority
		job.Priority = &prio
		blindSidecars(job, task)
		SetLeaseMeta(job.Meta, l.LeaseID)
		job.Meta[RestartCountMeta] = strconv.Itoa(restarts)
		delete(job.Meta, SuspendedMeta)
		delete(job.Meta, CountMeta)
		delete(job.Meta, HeldMeta)
		grace := j.Intent.GracePeriod
		task.KillTimeout = &grace
		setDisconnect(job, tg, c.StopOnClientAfter())
		tg.Constraints = withoutTarget(tg.Constraints, "${node.unique.id}")
		tg.Constraints = withoutOperand(tg.Constraints, api.ConstraintDistinctHosts)
		if len(parts) == 1 {
			// One allocation on one node: the group's count is the pin's
			// (a suspended job's 0 restored), never the job's meta.
			one := 1
			tg.Count = &one
			delete(job.Meta, GangMeta)
			tg.Constraints = append(tg.Constraints, &api.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: parts[0].NodeID})
		} else {
			nodes := make([]string, len(parts))
			for i, p := range parts {
				nodes[i] = p.NodeID
			}
			n := len(parts)
			tg.Count = &n
			job.Meta[GangMeta] = strconv.Itoa(n)
			tg.Constraints = append(tg.Constraints,
				&api.Constraint{LTarget: "${node.unique.id}", Operand: api.ConstraintSetContainsAny, RTarget: strings.Join(nodes, ",")},
				&api.Constraint{Operand: api.ConstraintDistinctHosts, RTarget: "true"})
		}
		setThemisDevice(task, len(parts[0].GPUs), &api.Constraint{
			LTarget: "${device.ids}", Operand: "set_contains_any", RTarget: strings.Join(l.GPUs, ","),
		})
		restoreCounts(job, tg, l.Counts)
		if j.Foreign() {
			c.pinForeign(j, tg, task, restarts)
		}
	}
}

// restoreCounts gives the groups other than the themis group (tg) the
// counts a hold took from them (lease.JobLease.Counts, from the planner's
// record of the hold); the themis group's count is the lease's.
func restoreCounts(job *api.Job, tg *api.TaskGroup, counts map[string]int) {
	for _, g := range job.TaskGroups {
		if g == nil || g == tg {
			continue
		}
		if n, ok := counts[deref(g.Name)]; ok {
			g.Count = &n
		}
	}
}

// Suspend takes a pinned job's GPUs back: it re-registers the job unpinned,
// in the pending pool, with its group count at 0, check-and-set on the
// JobModifyIndex the planner saw. Nomad then stops the allocation through
// the driver's StopTask with the task's kill_timeout (the grace period), so
// the workload checkpoints; the job shows as dead until the next pin, and
// SuspendedMeta records which lease was taken back.
//
// Why count 0: re-registering unpinned into the empty pool leaves the
// allocation running (Nomad backs out a destructive update it cannot
// place), and `nomad alloc stop` of a batch task that exits 0 after its
// checkpoint completes the job for good (see docs/design.md).
func (c *Client) Suspend(ctx context.Context, j *Job, leaseID string) error {
	if j.Task == "" {
		// A version whose themis task cannot be told (several: it is
		// rejected) that took a lease's place: every group stops, and
		// rewrite leaves no device request.
		return c.editAll(ctx, j, func(job *api.Job) {
			job.Meta[SuspendedMeta] = leaseID
			DropLeaseMeta(job.Meta)
			delete(job.Meta, GangMeta)
			zero := 0
			for _, tg := range job.TaskGroups {
				if tg != nil {
					tg.Count = &zero
				}
			}
			job.NodePool = &c.pendingPool
		})
	}
	return c.edit(ctx, j, "suspend", c.suspendChange(j, leaseID))
}

// suspendChange is what Suspend changes in a job with one themis task.
func (c *Client) suspendChange(j *Job, leaseID string) func(job *api.Job, tg *api.TaskGroup, task *api.Task) {
	return func(job *api.Job, tg *api.TaskGroup, task *api.Task) {
		if job.Meta[SuspendedMeta] == "" {
			count := 1
			if tg.Count != nil && job.Meta[GangMeta] == "" {
				count = *tg.Count
			}
			job.Meta[CountMeta] = strconv.Itoa(count)
		}
		delete(job.Meta, GangMeta)
		delete(job.Meta, HeldMeta)
		job.Meta[SuspendedMeta] = leaseID
		DropLeaseMeta(job.Meta)
		zero := 0
		tg.Count = &zero
		job.NodePool = &c.pendingPool
		tg.Constraints = withoutTarget(tg.Constraints, "${node.unique.id}")
		setThemisDevice(task, j.Intent.GPUs, nil)
	}
}

// editAll is edit for a job without one themis task: change gets the job,
// and every device request of the job is removed.
func (c *Client) editAll(ctx context.Context, j *Job, change func(job *api.Job)) error {
	job, err := current(j)
	if err != nil {
		return err
	}
	if job.Meta == nil {
		job.Meta = map[string]string{}
	}
	change(job)
	for _, g := range job.TaskGroups {
		if g == nil {
			continue
		}
		for _, t := range g.Tasks {
			if t != nil && t.Resources != nil {
				t.Resources.Devices = nil
			}
		}
	}
	return c.register(ctx, job, j)
}

// edit changes the job as the planner last read it (check-and-set on its
// JobModifyIndex) and re-registers it: change gets the job, with meta to
// write into, and its themis task and group (rewrite).
func (c *Client) edit(ctx context.Context, j *Job, what string, change func(job *api.Job, tg *api.TaskGroup, task *api.Task)) error {
	job, err := current(j)
	if err != nil {
		return err
	}
	if err := rewrite(job, j, what, change); err != nil {
		return err
	}
	return c.register(ctx, job, j)
}

// rewrite applies change to job (its themis task and group found as j
// names them), then removes every device request that change did not
// write: the themis task keeps only its one themis GPU request and every
// other task loses its devices. The planner registers the job with its own
// token, so nothing it did not write may move with it onto a GPU node (the
// whole-job check, checkWhole, rejects such jobs before they are granted;
// this holds even where it missed one).
func rewrite(job *api.Job, j *Job, what string, change func(job *api.Job, tg *api.TaskGroup, task *api.Task)) error {
	tg, task := findTask(job, j.Group, j.Task)
	if task == nil {
		return fmt.Errorf("%s %s: task %s/%s disappeared: %w", what, j.Key, j.Group, j.Task, ErrJobChanged)
	}
	if job.Meta == nil {
		job.Meta = map[string]string{}
	}
	change(job, tg, task)
	for _, g := range job.TaskGroups {
		if g == nil {
			continue
		}
		for _, t := range g.Tasks {
			if t == nil || t.Resources == nil {
				continue
			}
			if t != task {
				t.Resources.Devices = nil
				continue
			}
			var own []*api.RequestedDevice
			for _, d := range t.Resources.Devices {
				if d != nil && isThemisDevice(d.Name) {
					own = append(own, d)
				}
			}
			t.Resources.Devices = own
		}
	}
	return nil
}

// setThemisDevice makes count themis GPUs, constrained by pin when not
// nil, the task's one device request.
func setThemisDevice(task *api.Task, count int, pin *api.Constraint) {
	if task.Resources == nil {
		task.Resources = &api.Resources{}
	}
	n := uint64(count)
	req := &api.RequestedDevice{Name: topology.Vendor + "/" + topology.DeviceType, Count: &n}
	if pin != nil {
		req.Constraints = []*api.Constraint{pin}
	}
	task.Resources.Devices = []*api.RequestedDevice{req}
}

// Adopt moves a themis job that was submitted outside the pending pool into
// it, so that it waits for a grant like every other themis job.
func (c *Client) Adopt(ctx context.Context, j *Job) error {
	job, err := current(j)
	if err != nil {
		return err
	}
	job.NodePool = &c.pendingPool
	return c.register(ctx, job, j)
}

// current is the job to change and register: a deep copy of the definition
// the planner read, parsed and checked (the whole-job check) at j's
// JobModifyIndex, never that definition itself, which the snapshot keeps
// across rounds. Nothing reads the job again: the register's check-and-set
// on that index refuses a job changed, stopped or purged since
// (ErrJobChanged). A job read without a JobModifyIndex (never one Nomad
// returns) could only be refused, so it is refused here, unregistered.
func current(j *Job) (*api.Job, error) {
	if j.Job == nil || deref(j.Job.JobModifyIndex) == 0 {
		return nil, fmt.Errorf("job %s read without a modify index: %w", j.Key, ErrJobChanged)
	}
	job, err := copyJob(j.Job)
	if err != nil {
		return nil, err
	}
	// A registration carries the version tag it is sent with into the
	// new version (Nomad's register endpoint converts it): the copy of a
	// held version would tag the pinned one too, under the same name.
	job.VersionTag = nil
	return job, nil
}

// copyJob is a deep copy of job through its JSON: what register sends is
// the job's JSON, so the copy sends exactly what the job would.
func copyJob(job *api.Job) (*api.Job, error) {
	b, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("copy job %q: %w", deref(job.ID), err)
	}
	out := new(api.Job)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("copy job %q: %w", deref(job.ID), err)
	}
	return out, nil
}

func (c *Client) register(ctx context.Context, job *api.Job, j *Job) error {
	defer c.wrote() // counted whatever the answer: a round too many at worst
	_, _, err := c.api.Jobs().RegisterOpts(job, &api.RegisterOptions{EnforceIndex: true, ModifyIndex: j.ModifyIndex()},
		(&api.WriteOptions{Namespace: j.Key.Namespace}).WithContext(ctx))
	if err != nil {
		if strings.Contains(err.Error(), "Enforcing job modify index") {
			return fmt.Errorf("register %s: %w", j.Key, ErrJobChanged)
		}
		return denied(fmt.Errorf("register %s: %w", j.Key, err), "register job "+j.Key.String()+" (pool "+deref(job.NodePool)+")",
			`submit-job in namespace "`+j.Key.Namespace+`" and node_pool "`+deref(job.NodePool)+`" { policy = "read" }`)
	}
	return nil
}

func findTask(job *api.Job, group, task string) (*api.TaskGroup, *api.Task) {
	for _, tg := range job.TaskGroups {
		if tg == nil || deref(tg.Name) != group {
			continue
		}
		for _, t := range tg.Tasks {
			if t != nil && t.Name == task {
				return tg, t
			}
		}
	}
	return nil, nil
}

func withoutTarget(cs []*api.Constraint, ltarget string) []*api.Constraint {
	var out []*api.Constraint
	for _, c := range cs {
		if c.LTarget != ltarget {
			out = append(out, c)
		}
	}
	return out
}

func withoutOperand(cs []*api.Constraint, operand string) []*api.Constraint {
	var out []*api.Constraint
	for _, c := range cs {
		if c.Operand != operand {
			out = append(out, c)
		}
	}
	return out
}

func isThemisDevice(name string) bool {
	return name == topology.Vendor+"/"+topology.DeviceType || strings.HasPrefix(name, topology.Vendor+"/"+topology.DeviceType+"/")
}

func unixNano(ns int64) time.Time { return time.Unix(0, ns) }

// PlannerPolicy is the file of examples/acl with the planner's Nomad policy.
const PlannerPolicy = "planner.nomad.hcl"

// denied gives a Nomad ACL refusal of call the capability it needs.
func denied(err error, call, need string) error {
	return aclhint.Wrap(err, "Nomad", call, need, PlannerPolicy)
}

// CheckACL makes one of each of the planner's Nomad reads (nodes, jobs and
// allocations of every namespace) and returns the first ACL refusal, with
// its hint, or nil; other failures are returned as they are. The writes
// (node pool, job register) name their capability when they are refused.
func (c *Client) CheckACL(ctx context.Context) error {
	q := func() *api.QueryOptions { return (&api.QueryOptions{Namespace: "*", PerPage: 1}).WithContext(ctx) }
	if _, _, err := c.api.Nodes().List(q()); err != nil {
		return denied(fmt.Errorf("list nodes: %w", err), "list nodes (GET /v1/nodes)", `node { policy = "read" }`)
	}
	if _, _, err := c.api.Jobs().List(q()); err != nil {
		return denied(fmt.Errorf("list jobs: %w", err), "list jobs (GET /v1/jobs?namespace=*)", `namespace "*" { capabilities = ["list-jobs", "read-job"] }`)
	}
	if _, _, err := c.api.Allocations().List(q()); err != nil {
		return denied(fmt.Errorf("list allocations: %w", err), "list allocations (GET /v1/allocations?namespace=*)", `namespace "*" { capabilities = ["read-job"] }`)
	}
	return nil
}
