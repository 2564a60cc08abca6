package plannertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/nomadread"
)

// ErrCrash is what a write returns once its Budget is spent.
var ErrCrash = errors.New("planner crashed")

// Budget makes every write fail once n writes went through: a planner
// killed at that point. The planner's concurrent pins spend from it
// together with its other writes, so it is safe for concurrent use.
type Budget struct {
	mu   sync.Mutex
	Left int
}

// Spend takes one write from the budget, or fails with ErrCrash when none
// is left; a nil budget never runs out.
func (b *Budget) Spend() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Left <= 0 {
		return ErrCrash
	}
	b.Left--
	return nil
}

// Nomad is an in-memory Nomad with the semantics the planner relies on
// (planner.Nomad): check-and-set job registration on JobModifyIndex,
// count-0 suspension that stops an allocation only when the test lets it
// finish (Settle), jobs that cannot be read set aside in the snapshot. The
// e2e suite checks the same paths against real agents. Its fields are the
// cluster's state, for tests to read and shape.
type Nomad struct {
	// mu serializes the writes the planner may make concurrently (its
	// pins of a run of grants); tests read the fields between rounds.
	mu          sync.Mutex
	Clock       *time.Time
	Crash       *Budget
	Index       uint64
	Jobs        map[core.JobKey]*api.Job
	Allocs      map[core.JobKey][]*Alloc
	Nodes       []core.Node
	Suspensions int // effective suspensions (registrations with count 0)
	Holds       int // effective holds (Hold)
	// Tags are each job's version tags, by name: the version and its
	// description (as Nomad's job_version table keeps them).
	Tags map[core.JobKey]map[string]Tag
	// Cached, when set, is returned by Snapshot instead of parsing the jobs
	// again (as the real adapter parses only jobs that changed).
	Cached *nomad.Snapshot
	// Unreadable are jobs whose reads fail, with why (as nomadread's
	// Unreadable: Snapshot sets them aside).
	Unreadable map[core.JobKey]error
}

// Alloc is an allocation of the fake.
type Alloc struct {
	nomad.Alloc
	// StopAt is when a stopping allocation's task has checkpointed and
	// exited (zero: not stopping).
	StopAt time.Time
	// Orphan says the allocation is lost (LoseNode) but its task still
	// runs on its node, until OrphanUntil (its client, cut off, stops it
	// by itself) or until the node comes back (NodeBack).
	Orphan      bool
	OrphanUntil time.Time
}

// CheckpointTime is how long a suspended task takes to stop.
const CheckpointTime = 3 * time.Second

// NewNomad is a one-node cluster of gpus GPUs whose time is *clock.
func NewNomad(clock *time.Time, gpus int) *Nomad {
	return NewCluster(clock, 1, gpus)
}

// NewCluster has nodes of gpus GPUs each (2 sockets, NVLink pairs).
func NewCluster(clock *time.Time, nodes, gpus int) *Nomad {
	f := &Nomad{Clock: clock, Jobs: map[core.JobKey]*api.Job{}, Allocs: map[core.JobKey][]*Alloc{}}
	for k := range nodes {
		n := core.Node{ID: fmt.Sprintf("node-%d", k+1), Name: fmt.Sprintf("gpu-node-%d", k+1), Schedulable: true,
			GangAddr: fmt.Sprintf("10.0.0.%d", k+1)}
		if nodes == 1 {
			n.Name = "dev-node"
		}
		for i := range gpus {
			n.GPUs = append(n.GPUs, core.GPU{ID: fmt.Sprintf("gpu-%d-%d", k, i), Index: i,
				Path: []string{"socket" + strconv.Itoa(i*2/gpus), "pair" + strconv.Itoa(i/2)}, Healthy: true})
		}
		f.Nodes = append(f.Nodes, n)
	}
	return f
}

// Submit registers a themis job as a user would.
func (f *Nomad) Submit(id string, gpus int, class, grace string) {
	f.SubmitIn(id, gpus, class, grace, "default", 0)
}

// SubmitIn registers a themis job of a virtual cluster and priority.
func (f *Nomad) SubmitIn(id string, gpus int, class, grace, vc string, priority int) {
	f.Index++
	cfg := map[string]any{"command": "train", "themis": []any{map[string]any{"gpus": float64(gpus), "class": class, "grace_period": grace,
		"vc": vc, "priority": float64(priority)}}}
	f.Jobs[core.JobKey{Namespace: "default", ID: id}] = &api.Job{
		ID: ptr(id), Namespace: ptr("default"), Status: ptr("pending"), NodePool: ptr(nomad.DefaultPendingPool),
		JobModifyIndex: ptr(f.Index), CreateIndex: ptr(f.Index), Version: ptr(uint64(0)), SubmitTime: ptr(f.Clock.UnixNano()), Meta: map[string]string{},
		TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Count: ptr(1), Tasks: []*api.Task{{Name: "t", Driver: nomad.DriverName, Config: cfg}}}},
	}
}

// LoseNode is a node that stopped heartbeating, as Nomad's servers see it
// once the heartbeat grace is over: not schedulable, its allocations lost
// (Modified now), their tasks still running there (Orphan) until its
// client, cut off, stops them by itself after stopAfter (the group's
// stop_on_client_after and the kill; 0: a client killed outright, which
// stops nothing until NodeBack).
func (f *Nomad) LoseNode(id string, stopAfter time.Duration) {
	f.setSchedulable(id, false)
	for _, as := range f.Allocs {
		for _, a := range as {
			if a.NodeID == id && !a.Terminal() {
				a.ClientStatus, a.Modified, a.Orphan = "lost", *f.Clock, true
				if stopAfter > 0 {
					a.OrphanUntil = f.Clock.Add(stopAfter)
				}
			}
		}
	}
}

func (f *Nomad) setSchedulable(id string, on bool) {
	for i := range f.Nodes {
		if f.Nodes[i].ID == id {
			f.Nodes[i].Schedulable = on
		}
	}
}

// NodeBack is a lost node's client started again: it kills the tasks of
// its lost allocations (the servers want them stopped) and reports them
// complete; the node is schedulable again.
func (f *Nomad) NodeBack(id string) {
	f.setSchedulable(id, true)
	for _, as := range f.Allocs {
		for _, a := range as {
			if a.NodeID == id && a.Orphan {
				a.Orphan, a.ClientStatus, a.Finished, a.Modified = false, "complete", *f.Clock, *f.Clock
			}
		}
	}
}

// Settle ends the stopping allocations whose checkpoint is done by now,
// and the orphans whose client stopped them by itself.
func (f *Nomad) Settle() {
	for k, as := range f.Allocs {
		for _, a := range as {
			if a.Orphan && !a.OrphanUntil.IsZero() && !a.OrphanUntil.After(*f.Clock) {
				a.Orphan = false
			}
			if !a.StopAt.IsZero() && !a.StopAt.After(*f.Clock) && !a.Terminal() {
				a.ClientStatus, a.Finished = "complete", a.StopAt
			}
		}
		if j := f.Jobs[k]; j != nil && *j.TaskGroups[0].Count == 0 {
			j.Status = ptr("dead")
		}
	}
}

// Finish ends a job's running allocation as its task completing would.
func (f *Nomad) Finish(id string) {
	k := core.JobKey{Namespace: "default", ID: id}
	for _, a := range f.Allocs[k] {
		if !a.Terminal() {
			a.ClientStatus, a.Finished = "complete", *f.Clock
		}
	}
	f.Jobs[k].Status = ptr("dead")
}

// Running lists a job's allocations that are not terminal.
func (f *Nomad) Running(id string) []*Alloc {
	var out []*Alloc
	for _, a := range f.Allocs[core.JobKey{Namespace: "default", ID: id}] {
		if !a.Terminal() {
			out = append(out, a)
		}
	}
	return out
}

// RunningIDs lists, sorted, the jobs with a running allocation that is not
// stopping.
func (f *Nomad) RunningIDs() []string {
	var out []string
	for k := range f.Allocs {
		if r := f.Running(k.ID); len(r) > 0 && r[0].StopAt.IsZero() {
			out = append(out, k.ID)
		}
	}
	slices.Sort(out)
	return out
}

func (f *Nomad) EnsurePendingPool(context.Context) error { return nil }
func (f *Nomad) PendingPool() string                     { return nomad.DefaultPendingPool }
func (f *Nomad) Watch(ctx context.Context, i uint64, _ func()) (uint64, error) {
	<-ctx.Done()
	return i, ctx.Err()
}

func (f *Nomad) Snapshot(context.Context) (*nomad.Snapshot, error) {
	if f.Cached != nil {
		return f.Cached, nil
	}
	s := &nomad.Snapshot{Nodes: f.Nodes, Pools: map[string]string{}, Allocs: map[core.JobKey][]nomad.Alloc{}}
	for _, n := range f.Nodes {
		s.Pools[n.ID] = "default"
	}
	for _, k := range slices.SortedFunc(maps.Keys(f.Jobs), compareKeys) {
		c := *f.Jobs[k]
		c.Meta = maps.Clone(c.Meta)
		if err := f.Unreadable[k]; err != nil {
			markUnreadable(s, k, &nomadread.Unreadable{Namespace: k.Namespace, ID: k.ID, Err: err})
			continue
		}
		j, err := nomad.ParseJob(&c)
		switch {
		case errors.Is(err, nomad.ErrNotThemis):
			continue // as the real adapter: not the planner's
		case err != nil:
			markUnreadable(s, k, &nomadread.Unreadable{Namespace: k.Namespace, ID: k.ID, Err: err})
			continue
		}
		s.Jobs = append(s.Jobs, j)
	}
	for k, as := range f.Allocs {
		for _, a := range as {
			s.Allocs[k] = append(s.Allocs[k], a.Alloc)
		}
	}
	return s, nil
}

// reregister is the check-and-set register the planner's edits of j
// make: the job as the planner read it (else ErrJobChanged), now its next
// version at a new modify index, for the caller to change. The caller
// holds f.mu.
func (f *Nomad) reregister(j *nomad.Job) (*api.Job, error) {
	cur := f.Jobs[j.Key]
	if cur == nil || *cur.JobModifyIndex != j.ModifyIndex() {
		return nil, nomad.ErrJobChanged
	}
	f.Index++
	newVersion(cur)
	cur.VersionTag = nil // a new version carries no tag
	cur.JobModifyIndex = ptr(f.Index)
	return cur, nil
}

// stopAllocs has the job's running allocations stop once their checkpoint
// is done (Settle ends them), as Nomad stops them at count 0.
func (f *Nomad) stopAllocs(k core.JobKey) {
	for _, a := range f.Allocs[k] {
		if a.StopAt.IsZero() && !a.Terminal() {
			a.StopAt = f.Clock.Add(CheckpointTime)
		}
	}
}

// Tag is a version tag of the fake.
type Tag struct {
	Version     uint64
	Description string
}

// Hold registers j with every group at count 0 in the pending pool, as
// nomad.Client.Hold: Nomad has nothing to place and shows it dead.
func (f *Nomad) Hold(_ context.Context, j *nomad.Job, holdID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Crash.Spend(); err != nil {
		return err
	}
	cur, err := f.reregister(j)
	if err != nil {
		return err
	}
	f.Holds++
	cur.NodePool, cur.Status = ptr(nomad.DefaultPendingPool), ptr("dead")
	cur.Meta[nomad.HeldMeta] = holdID
	for _, tg := range cur.TaskGroups {
		tg.Count = ptr(0)
	}
	f.stopAllocs(j.Key)
	return nil
}

// TagHeld tags the job's version j names, as Nomad's TagVersion: a name
// on another version is refused, so it is moved (nomad.Client.TagHeld).
func (f *Nomad) TagHeld(_ context.Context, j *nomad.Job, description string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Crash.Spend(); err != nil {
		return err
	}
	cur := f.Jobs[j.Key]
	if cur == nil {
		return fmt.Errorf("job %q not found", j.Key.ID)
	}
	if f.Tags == nil {
		f.Tags = map[core.JobKey]map[string]Tag{}
	}
	if f.Tags[j.Key] == nil {
		f.Tags[j.Key] = map[string]Tag{}
	}
	v := *j.Job.Version
	f.Tags[j.Key][nomad.HeldTag] = Tag{Version: v, Description: description}
	if *cur.Version == v {
		cur.VersionTag = &api.JobVersionTag{Name: nomad.HeldTag, Description: description}
	}
	return nil
}

// UntagHeld removes the held tag from whichever version has it.
func (f *Nomad) UntagHeld(_ context.Context, k core.JobKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Crash.Spend(); err != nil {
		return err
	}
	delete(f.Tags[k], nomad.HeldTag)
	if cur := f.Jobs[k]; cur != nil && cur.VersionTag != nil && cur.VersionTag.Name == nomad.HeldTag {
		cur.VersionTag = nil
	}
	return nil
}

// Tagged reports whether any version of the job carries the held tag
// (what keeps it from Nomad's garbage collection), and its description.
func (f *Nomad) Tagged(k core.JobKey) (string, bool) {
	t, ok := f.Tags[k][nomad.HeldTag]
	return t.Description, ok
}

func (f *Nomad) Pin(_ context.Context, j *nomad.Job, l lease.JobLease, pool string, restarts int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Crash.Spend(); err != nil {
		return err
	}
	cur, err := f.reregister(j)
	if err != nil {
		return err
	}
	cur.NodePool, cur.Status = ptr(pool), ptr("running")
	nomad.SetLeaseMeta(cur.Meta, l.LeaseID)
	cur.Meta[nomad.RestartCountMeta] = strconv.Itoa(restarts)
	delete(cur.Meta, nomad.SuspendedMeta)
	delete(cur.Meta, nomad.CountMeta)
	delete(cur.Meta, nomad.HeldMeta)
	parts := l.Nodes()
	cur.TaskGroups[0].Count = ptr(len(parts))
	for _, tg := range cur.TaskGroups[1:] {
		if n, ok := l.Counts[*tg.Name]; ok {
			tg.Count = ptr(n)
		}
	}
	delete(cur.Meta, nomad.GangMeta)
	if len(parts) > 1 {
		cur.Meta[nomad.GangMeta] = strconv.Itoa(len(parts))
	}
	for i, p := range parts {
		f.Allocs[j.Key] = append(f.Allocs[j.Key], &Alloc{Alloc: nomad.Alloc{
			ID: fmt.Sprintf("alloc-%d-%d", f.Index, i), NodeID: p.NodeID, ClientStatus: "running", Created: *f.Clock, Started: *f.Clock}})
	}
	return nil
}

func (f *Nomad) Suspend(_ context.Context, j *nomad.Job, leaseID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Crash.Spend(); err != nil {
		return err
	}
	cur, err := f.reregister(j)
	if err != nil {
		return err
	}
	f.Suspensions++
	cur.NodePool = ptr(nomad.DefaultPendingPool)
	if cur.Meta[nomad.SuspendedMeta] == "" {
		cur.Meta[nomad.CountMeta] = "1" // as nomad.Client.Suspend: a gang's count is the pin's
	}
	delete(cur.Meta, nomad.GangMeta)
	delete(cur.Meta, nomad.HeldMeta)
	cur.Meta[nomad.SuspendedMeta] = leaseID
	nomad.DropLeaseMeta(cur.Meta)
	cur.TaskGroups[0].Count = ptr(0)
	f.stopAllocs(j.Key)
	return nil
}

func (f *Nomad) Adopt(_ context.Context, j *nomad.Job) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, err := f.reregister(j)
	if err != nil {
		return err
	}
	cur.NodePool = ptr(nomad.DefaultPendingPool)
	return nil
}

// newVersion numbers a registration as Nomad does (its state store's
// upsertJobImpl): the version after the one it replaces.
func newVersion(j *api.Job) {
	v := uint64(0)
	if j.Version != nil {
		v = *j.Version + 1
	}
	j.Version = &v
}

// SubmitAs registers a themis job of namespace ns claiming a virtual
// cluster, priority and class in its stanza.
func (f *Nomad) SubmitAs(ns, id string, gpus int, class, vc string, priority int) {
	f.SubmitIn(id, gpus, class, "10s", vc, priority)
	k := core.JobKey{Namespace: "default", ID: id}
	j := f.Jobs[k]
	delete(f.Jobs, k)
	j.Namespace = ptr(ns)
	f.Jobs[core.JobKey{Namespace: ns, ID: id}] = j
}

// SubmitApp registers a themis job of an app (the stanza's app field).
func (f *Nomad) SubmitApp(id string, gpus int, app string) {
	f.Submit(id, gpus, "be", "5s")
	j := f.Jobs[core.JobKey{Namespace: "default", ID: id}]
	j.TaskGroups[0].Tasks[0].Config["themis"].([]any)[0].(map[string]any)["app"] = app
}

// Submitted is the job a user's submission left in the fake, for a test to
// shape before the planner sees it.
func (f *Nomad) Submitted(id string) *api.Job {
	return f.Jobs[core.JobKey{Namespace: "default", ID: id}]
}

// Reregister is a user's `nomad job run` of a job it reads back first (as
// `nomad job inspect` gives it: the planner's meta included), changed by
// change: a new version of the job, at a new index.
func (f *Nomad) Reregister(id string, change func(j *api.Job)) {
	k := core.JobKey{Namespace: "default", ID: id}
	j := f.Jobs[k]
	j.Meta = maps.Clone(j.Meta)
	change(j)
	f.Index++
	newVersion(j)
	j.JobModifyIndex = ptr(f.Index)
	if *j.TaskGroups[0].Count > 0 && *j.Status == "dead" {
		j.Status = ptr("pending") // Nomad's status of a job with work to place
	}
}

// markUnreadable records an unreadable job in the snapshot, as the real
// adapter does (nomad.Client.Snapshot).
func markUnreadable(s *nomad.Snapshot, k core.JobKey, err error) {
	if s.Unreadable == nil {
		s.Unreadable = map[core.JobKey]string{}
	}
	s.Unreadable[k] = err.Error()
}

func compareKeys(a, b core.JobKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
}

func ptr[T any](v T) *T { return &v }

// Move puts job id of namespace "default" into namespace ns.
func (f *Nomad) Move(id, ns string) {
	k := core.JobKey{Namespace: "default", ID: id}
	j := f.Jobs[k]
	delete(f.Jobs, k)
	j.Namespace = ptr(ns)
	f.Jobs[core.JobKey{Namespace: ns, ID: id}] = j
}
