package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/nomadread"
	"github.com/themis-nomad/themis/planner/stack"
)

// In-memory stand-ins for Nomad and Consul with the semantics the planner
// relies on: check-and-set job registration, count-0 suspension that stops
// an allocation only when the test lets it finish, all-or-nothing lease
// transactions. The e2e suite checks the same paths against real agents.

var errCrash = errors.New("planner crashed")

// budget makes every write fail once n writes went through: a planner
// killed at that point.
type budget struct{ left int }

func (b *budget) spend() error {
	if b == nil {
		return nil
	}
	if b.left <= 0 {
		return errCrash
	}
	b.left--
	return nil
}

type fakeNomad struct {
	clock   *time.Time
	crash   *budget
	index   uint64
	jobs    map[core.JobKey]*api.Job
	allocs  map[core.JobKey][]*fakeAlloc
	nodes   []core.Node
	suspend int // effective suspensions (registrations with count 0)
	// cached, when set, is returned by Snapshot instead of parsing the jobs
	// again (as the real adapter parses only jobs that changed).
	cached *nomad.Snapshot
	// unreadable are jobs whose reads fail, with why (as nomadread's
	// Unreadable: Snapshot sets them aside).
	unreadable map[core.JobKey]error
}

type fakeAlloc struct {
	nomad.Alloc
	// stopAt is when a stopping allocation's task has checkpointed and
	// exited (zero: not stopping).
	stopAt time.Time
}

// checkpointTime is how long a suspended task takes to stop.
const checkpointTime = 3 * time.Second

func newFakeNomad(clock *time.Time, gpus int) *fakeNomad {
	return newFakeCluster(clock, 1, gpus)
}

// newFakeCluster has nodes of gpus GPUs each (2 sockets, NVLink pairs).
func newFakeCluster(clock *time.Time, nodes, gpus int) *fakeNomad {
	f := &fakeNomad{clock: clock, jobs: map[core.JobKey]*api.Job{}, allocs: map[core.JobKey][]*fakeAlloc{}}
	for k := range nodes {
		n := core.Node{ID: fmt.Sprintf("node-%d", k+1), Name: fmt.Sprintf("gpu-node-%d", k+1), Schedulable: true}
		if nodes == 1 {
			n.Name = "dev-node"
		}
		for i := range gpus {
			n.GPUs = append(n.GPUs, core.GPU{ID: fmt.Sprintf("gpu-%d-%d", k, i), Index: i,
				Path: []string{"socket" + strconv.Itoa(i*2/gpus), "pair" + strconv.Itoa(i/2)}, Healthy: true})
		}
		f.nodes = append(f.nodes, n)
	}
	return f
}

// submit registers a themis job as a user would.
func (f *fakeNomad) submit(id string, gpus int, class, grace string) {
	f.submitIn(id, gpus, class, grace, "default", 0)
}

// submitIn registers a themis job of a virtual cluster and priority.
func (f *fakeNomad) submitIn(id string, gpus int, class, grace, vc string, priority int) {
	f.index++
	cfg := map[string]any{"command": "train", "themis": []any{map[string]any{"gpus": float64(gpus), "class": class, "grace_period": grace,
		"vc": vc, "priority": float64(priority)}}}
	f.jobs[core.JobKey{Namespace: "default", ID: id}] = &api.Job{
		ID: ptr(id), Namespace: ptr("default"), Status: ptr("pending"), NodePool: ptr(nomad.DefaultPendingPool),
		JobModifyIndex: ptr(f.index), CreateIndex: ptr(f.index), Version: ptr(uint64(0)), SubmitTime: ptr(f.clock.UnixNano()), Meta: map[string]string{},
		TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Count: ptr(1), Tasks: []*api.Task{{Name: "t", Driver: nomad.DriverName, Config: cfg}}}},
	}
}

// settle ends the stopping allocations whose checkpoint is done by now.
func (f *fakeNomad) settle() {
	for k, as := range f.allocs {
		for _, a := range as {
			if !a.stopAt.IsZero() && !a.stopAt.After(*f.clock) && !a.Terminal() {
				a.ClientStatus, a.Finished = "complete", a.stopAt
			}
		}
		if j := f.jobs[k]; j != nil && *j.TaskGroups[0].Count == 0 {
			j.Status = ptr("dead")
		}
	}
}

// finish ends a job's running allocation as its task completing would.
func (f *fakeNomad) finish(id string) {
	k := core.JobKey{Namespace: "default", ID: id}
	for _, a := range f.allocs[k] {
		if !a.Terminal() {
			a.ClientStatus, a.Finished = "complete", *f.clock
		}
	}
	f.jobs[k].Status = ptr("dead")
}

func (f *fakeNomad) running(id string) []*fakeAlloc {
	var out []*fakeAlloc
	for _, a := range f.allocs[core.JobKey{Namespace: "default", ID: id}] {
		if !a.Terminal() {
			out = append(out, a)
		}
	}
	return out
}

// runningIDs lists, sorted, the jobs with a running allocation that is not
// stopping.
func (f *fakeNomad) runningIDs() []string {
	var out []string
	for k := range f.allocs {
		if r := f.running(k.ID); len(r) > 0 && r[0].stopAt.IsZero() {
			out = append(out, k.ID)
		}
	}
	slices.Sort(out)
	return out
}

func (f *fakeNomad) EnsurePendingPool(context.Context) error { return nil }
func (f *fakeNomad) PendingPool() string                     { return nomad.DefaultPendingPool }
func (f *fakeNomad) Watch(ctx context.Context, i uint64, _ func()) (uint64, error) {
	<-ctx.Done()
	return i, ctx.Err()
}

func (f *fakeNomad) Snapshot(context.Context) (*nomad.Snapshot, error) {
	if f.cached != nil {
		return f.cached, nil
	}
	s := &nomad.Snapshot{Nodes: f.nodes, Pools: map[string]string{}, Allocs: map[core.JobKey][]nomad.Alloc{}}
	for _, n := range f.nodes {
		s.Pools[n.ID] = "default"
	}
	for _, k := range slices.SortedFunc(maps.Keys(f.jobs), compareKeys) {
		c := *f.jobs[k]
		c.Meta = maps.Clone(c.Meta)
		if err := f.unreadable[k]; err != nil {
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
	for k, as := range f.allocs {
		for _, a := range as {
			s.Allocs[k] = append(s.Allocs[k], a.Alloc)
		}
	}
	return s, nil
}

func (f *fakeNomad) current(j *nomad.Job) (*api.Job, error) {
	cur := f.jobs[j.Key]
	if cur == nil || *cur.JobModifyIndex != j.ModifyIndex() {
		return nil, nomad.ErrJobChanged
	}
	return cur, nil
}

func (f *fakeNomad) Pin(_ context.Context, j *nomad.Job, l lease.JobLease, pool string, restarts int) error {
	if err := f.crash.spend(); err != nil {
		return err
	}
	cur, err := f.current(j)
	if err != nil {
		return err
	}
	f.index++
	newVersion(cur)
	cur.JobModifyIndex, cur.NodePool, cur.Status = ptr(f.index), ptr(pool), ptr("running")
	cur.Meta[nomad.LeaseMeta], cur.Meta[nomad.RestartCountMeta] = l.LeaseID, strconv.Itoa(restarts)
	delete(cur.Meta, nomad.SuspendedMeta)
	delete(cur.Meta, nomad.CountMeta)
	parts := l.Nodes()
	cur.TaskGroups[0].Count = ptr(len(parts))
	delete(cur.Meta, nomad.GangMeta)
	if len(parts) > 1 {
		cur.Meta[nomad.GangMeta] = strconv.Itoa(len(parts))
	}
	for i, p := range parts {
		f.allocs[j.Key] = append(f.allocs[j.Key], &fakeAlloc{Alloc: nomad.Alloc{
			ID: fmt.Sprintf("alloc-%d-%d", f.index, i), NodeID: p.NodeID, ClientStatus: "running", Created: *f.clock, Started: *f.clock}})
	}
	return nil
}

func (f *fakeNomad) Suspend(_ context.Context, j *nomad.Job, leaseID string) error {
	if err := f.crash.spend(); err != nil {
		return err
	}
	cur, err := f.current(j)
	if err != nil {
		return err
	}
	f.index++
	newVersion(cur)
	f.suspend++
	cur.JobModifyIndex, cur.NodePool = ptr(f.index), ptr(nomad.DefaultPendingPool)
	if cur.Meta[nomad.SuspendedMeta] == "" {
		cur.Meta[nomad.CountMeta] = "1" // as nomad.Client.Suspend: a gang's count is the pin's
	}
	delete(cur.Meta, nomad.GangMeta)
	cur.Meta[nomad.SuspendedMeta] = leaseID
	delete(cur.Meta, nomad.LeaseMeta)
	cur.TaskGroups[0].Count = ptr(0)
	for _, a := range f.allocs[j.Key] {
		if a.stopAt.IsZero() && !a.Terminal() {
			a.stopAt = f.clock.Add(checkpointTime)
		}
	}
	return nil
}

func (f *fakeNomad) Adopt(_ context.Context, j *nomad.Job) error {
	cur, err := f.current(j)
	if err != nil {
		return err
	}
	f.index++
	newVersion(cur)
	cur.JobModifyIndex, cur.NodePool = ptr(f.index), ptr(nomad.DefaultPendingPool)
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

// fakeStore keeps leases and records as Consul's KV would.
type fakeStore struct {
	crash    *budget
	index    uint64
	leases   map[core.JobKey]lease.JobLease
	gpus     map[string]string // GPU -> lease ID
	records  map[core.JobKey]consul.JobRecord
	recIndex map[core.JobKey]uint64
	statuses map[core.JobKey]consul.JobStatus
	ckpts    map[core.JobKey]lease.CheckpointRecord
	progress map[core.JobKey]lease.ProgressRecord
	pending  map[core.JobKey]lease.Pending
	policy   map[string][]byte
	auction  []byte
	// statusCalls counts WriteStatuses calls; statusFail, when set, fails
	// them after that many writes were committed.
	statusCalls int
	statusFail  *statusFail
	// lastPuts and lastDels are the last WriteStatuses call's.
	lastPuts []consul.JobStatus
	lastDels []core.JobKey
	// bad are keys whose values cannot be used: each listing leaves out
	// the value under such a key (it stays in the maps above) and names
	// it in a *consul.UnreadableError, as consul.Store does.
	bad []consul.BadKey
}

func newFakeStore() *fakeStore {
	return &fakeStore{leases: map[core.JobKey]lease.JobLease{}, gpus: map[string]string{}, ckpts: map[core.JobKey]lease.CheckpointRecord{},
		records: map[core.JobKey]consul.JobRecord{}, recIndex: map[core.JobKey]uint64{}, statuses: map[core.JobKey]consul.JobStatus{}}
}

func (s *fakeStore) Leases(context.Context) (map[core.JobKey]lease.JobLease, error) {
	return withoutBad(s, lease.JobPrefix(), maps.Clone(s.leases)), s.unreadable(lease.JobPrefix())
}

func (s *fakeStore) GPULeases(context.Context) (map[string]lease.GPULease, error) {
	out := map[string]lease.GPULease{}
	for _, l := range s.leases {
		for _, g := range l.GPULeases() {
			out[g.GPU] = g
		}
	}
	return out, nil
}

func (s *fakeStore) Grant(_ context.Context, l lease.JobLease) error {
	if err := s.crash.spend(); err != nil {
		return err
	}
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	if _, ok := s.leases[k]; ok {
		return fmt.Errorf("grant %s: job already leased", k)
	}
	for _, g := range l.GPUs {
		if _, ok := s.gpus[g]; ok {
			return fmt.Errorf("grant %s: GPU %s already leased", k, g)
		}
	}
	s.leases[k] = l
	for _, g := range l.GPUs {
		s.gpus[g] = l.LeaseID
	}
	return nil
}

func (s *fakeStore) Revoke(_ context.Context, l lease.JobLease, r lease.Revoke) (lease.JobLease, error) {
	if err := s.crash.spend(); err != nil {
		return l, err
	}
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	cur, ok := s.leases[k]
	if !ok || cur.LeaseID != l.LeaseID {
		return l, fmt.Errorf("revoke %s: lease gone", k)
	}
	if cur.Revoke == nil {
		cur.Revoke = &r
		s.leases[k] = cur
	}
	return cur, nil
}

func (s *fakeStore) SetVersions(_ context.Context, l lease.JobLease) (lease.JobLease, error) {
	if err := s.crash.spend(); err != nil {
		return l, err
	}
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	cur, ok := s.leases[k]
	if !ok || cur.LeaseID != l.LeaseID {
		return l, fmt.Errorf("set versions %s: lease gone", k)
	}
	cur.Pinned = l.Pinned
	if cur.Revoke != nil && l.Revoke != nil {
		r := *cur.Revoke
		r.Suspends = l.Revoke.Suspends
		cur.Revoke = &r
	}
	s.leases[k] = cur
	return cur, nil
}

func (s *fakeStore) Release(_ context.Context, l lease.JobLease, rec *consul.JobRecord) error {
	if err := s.crash.spend(); err != nil {
		return err
	}
	k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
	cur, ok := s.leases[k]
	if !ok || cur.LeaseID != l.LeaseID {
		return nil
	}
	if rec != nil && s.recIndex[k] != rec.Index() {
		return fmt.Errorf("release %s: record changed", k)
	}
	delete(s.leases, k)
	for _, g := range l.GPUs {
		if s.gpus[g] == l.LeaseID {
			delete(s.gpus, g)
		}
	}
	if rec != nil {
		s.index++
		s.records[k], s.recIndex[k] = *rec, s.index
		*rec = consul.WithIndex(*rec, s.index)
	}
	return nil
}

func (s *fakeStore) Records(context.Context) (map[core.JobKey]consul.JobRecord, error) {
	out := map[core.JobKey]consul.JobRecord{}
	for k, r := range s.records {
		out[k] = consul.WithIndex(r, s.recIndex[k])
	}
	return withoutBad(s, consul.RecordPrefix, out), s.unreadable(consul.RecordPrefix)
}

func (s *fakeStore) PutRecord(_ context.Context, r consul.JobRecord) (consul.JobRecord, error) {
	if err := s.crash.spend(); err != nil {
		return r, err
	}
	k := r.Key()
	if s.recIndex[k] != r.Index() {
		return r, fmt.Errorf("put record %s: changed", k)
	}
	s.index++
	s.records[k], s.recIndex[k] = r, s.index
	return consul.WithIndex(r, s.index), nil
}

func (s *fakeStore) DeleteRecord(_ context.Context, k core.JobKey) error {
	if err := s.crash.spend(); err != nil {
		return err
	}
	delete(s.records, k)
	delete(s.recIndex, k)
	delete(s.ckpts, k)
	return nil
}

func (s *fakeStore) Checkpoints(context.Context) (map[core.JobKey]lease.CheckpointRecord, error) {
	return withoutBad(s, lease.CheckpointPrefix(), maps.Clone(s.ckpts)), s.unreadable(lease.CheckpointPrefix())
}

func (s *fakeStore) Progress(context.Context) (map[core.JobKey]lease.ProgressRecord, error) {
	return withoutBad(s, lease.ProgressPrefix(), maps.Clone(s.progress)), s.unreadable(lease.ProgressPrefix())
}

func (s *fakeStore) Pending(context.Context) (map[core.JobKey]lease.Pending, error) {
	return withoutBad(s, lease.PendingPrefix(), maps.Clone(s.pending)), s.unreadable(lease.PendingPrefix())
}

func (s *fakeStore) PutPending(_ context.Context, pg lease.Pending) error {
	if err := s.crash.spend(); err != nil {
		return err
	}
	if s.pending == nil {
		s.pending = map[core.JobKey]lease.Pending{}
	}
	s.pending[core.JobKey{Namespace: pg.Namespace, ID: pg.JobID}] = pg
	return nil
}

func (s *fakeStore) DeletePending(_ context.Context, k core.JobKey) error {
	if err := s.crash.spend(); err != nil {
		return err
	}
	delete(s.pending, k)
	return nil
}

func (s *fakeStore) PolicyState(_ context.Context, name string) ([]byte, error) {
	return s.policy[name], nil
}

func (s *fakeStore) PutPolicyState(_ context.Context, name string, state []byte) error {
	if err := s.crash.spend(); err != nil {
		return err
	}
	if s.policy == nil {
		s.policy = map[string][]byte{}
	}
	s.policy[name] = slices.Clone(state)
	return nil
}

func (s *fakeStore) PutAuction(_ context.Context, report []byte) error {
	s.auction = slices.Clone(report)
	return nil
}

func (s *fakeStore) SetLeaseEnd(_ context.Context, l lease.JobLease) error {
	if err := s.crash.spend(); err != nil {
		return err
	}
	if cur, ok := s.leases[core.JobKey{Namespace: l.Namespace, ID: l.JobID}]; ok && cur.LeaseID == l.LeaseID && cur.Revoke == nil {
		cur.Ends = l.Ends
		s.leases[core.JobKey{Namespace: l.Namespace, ID: l.JobID}] = cur
	}
	return nil
}

func (s *fakeStore) Statuses(context.Context) ([]consul.JobStatus, error) {
	return slices.Collect(maps.Values(s.statuses)), nil
}

// WriteStatuses commits the writes, puts first, up to statusFail's: as
// consul.Store.WriteStatuses, where the transaction holding it failed.
func (s *fakeStore) WriteStatuses(_ context.Context, puts []consul.JobStatus, dels []core.JobKey) (int, error) {
	s.statusCalls++
	s.lastPuts, s.lastDels = slices.Clone(puts), slices.Clone(dels)
	n := 0
	for _, st := range puts {
		if s.statusFail != nil && n >= s.statusFail.after {
			return n, s.statusFail.err
		}
		s.statuses[core.JobKey{Namespace: st.Namespace, ID: st.JobID}] = st
		n++
	}
	for _, k := range dels {
		if s.statusFail != nil && n >= s.statusFail.after {
			return n, s.statusFail.err
		}
		delete(s.statuses, k)
		n++
	}
	return n, nil
}

func ptr[T any](v T) *T { return &v }

// harness is a fake cluster with its planner, driven round by round.
type harness struct {
	t      *testing.T
	clock  time.Time
	fn     *fakeNomad
	fs     *fakeStore
	p      *Planner
	config Config
}

// newHarness builds a one-node cluster of gpus GPUs planned by st.
func newHarness(t *testing.T, gpus int, st *stack.Stack) *harness {
	h := &harness{t: t, clock: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	h.fn, h.fs = newFakeNomad(&h.clock, gpus), newFakeStore()
	h.config = Config{Nomad: h.fn, Store: h.fs, Stack: st, Now: func() time.Time { return h.clock }}
	h.restart()
	return h
}

// newClusterHarness is newHarness on a cluster of nodes nodes.
func newClusterHarness(t *testing.T, nodes, gpus int, st *stack.Stack) *harness {
	h := newHarness(t, gpus, st)
	h.fn = newFakeCluster(&h.clock, nodes, gpus)
	h.config.Nomad = h.fn
	h.restart()
	return h
}

// restart replaces the planner with a new one (a crash and restart).
func (h *harness) restart() { h.p = New(h.config) }

// round runs one reconcile, checks that no task runs without its lease,
// lets Nomad's stopping allocations end, and moves the clock a second on.
func (h *harness) round(when string) {
	h.t.Helper()
	if err := h.p.Reconcile(context.Background()); err != nil {
		h.t.Fatalf("%s: %v", when, err)
	}
	checkNoTaskWithoutLease(h.t, h.fn, h.fs, when)
	h.fn.settle()
	h.clock = h.clock.Add(time.Second)
}

// mustStack is stack.Build, failing the test or benchmark on error.
func mustStack(tb testing.TB, policy string, opts stack.Options) *stack.Stack {
	tb.Helper()
	st, err := stack.Build(policy, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// vcsStack is a policy's stack with the virtual clusters of the HCL
// config src (named name in errors).
func vcsStack(tb testing.TB, policy, name, src string) *stack.Stack {
	tb.Helper()
	vcs, err := hived.ParseConfig(name, []byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	return mustStack(tb, policy, stack.Options{VCs: vcs})
}
