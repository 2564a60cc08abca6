package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// reconcile is a function of the world as read: these tests build worlds
// by hand (a node of four GPUs, jobs as Nomad returns them, Consul's
// leases, records and pending grants) and check the steps it plans, in
// order, and the statuses it leaves, for every case the revoke and pending
// paths recover from. Nothing is written: the planner has no Nomad and no
// Consul.

const (
	testPool  = "themis-pending"
	leaseA    = "lease-a"
	leaseB    = "lease-b"
	testGrace = 30 * time.Second
)

var (
	testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	keyA    = core.JobKey{Namespace: "default", ID: "a"}
	keyB    = core.JobKey{Namespace: "default", ID: "b"}
)

// testWorld is a world of one node (n1: GPUs g0 to g3, in pool default)
// and nothing else yet.
func testWorld() *world {
	n := core.Node{ID: "n1", Name: "node-1", Schedulable: true}
	for i := range 4 {
		n.GPUs = append(n.GPUs, core.GPU{ID: fmt.Sprintf("g%d", i), Index: i, Healthy: true})
	}
	return &world{
		now: testNow, pendingPool: testPool,
		snap: &nomad.Snapshot{Nodes: []core.Node{n}, Pools: map[string]string{"n1": "default"}, Allocs: map[core.JobKey][]nomad.Alloc{}},
		store: &store{leases: map[core.JobKey]lease.JobLease{}, records: map[core.JobKey]lease.JobRecord{},
			pending: map[core.JobKey]lease.Pending{}, aside: map[core.JobKey]string{}},
	}
}

// queued is job id of gpus GPUs as submitted (version 0, in the pending
// pool); edit changes it before it is parsed.
func queued(t *testing.T, id string, gpus int, edit ...func(*api.Job)) *nomad.Job {
	t.Helper()
	cfg := map[string]any{"command": "train", "themis": []any{map[string]any{"gpus": float64(gpus), "class": "be",
		"grace_period": testGrace.String(), "app": id}}}
	j := &api.Job{
		ID: ptr(id), Namespace: ptr("default"), Status: ptr("pending"), NodePool: ptr(testPool),
		JobModifyIndex: ptr(uint64(10)), CreateIndex: ptr(uint64(1)), Version: ptr(uint64(0)),
		SubmitTime: ptr(testNow.Add(-time.Hour).UnixNano()), Meta: map[string]string{},
		TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Count: ptr(1), Tasks: []*api.Task{{Name: "t", Driver: nomad.DriverName, Config: cfg}}}},
	}
	for _, e := range edit {
		e(j)
	}
	pj, err := nomad.ParseJob(j)
	if err != nil {
		t.Fatal(err)
	}
	return pj
}

// pinned is the version of a job the planner's pin of lease id registered
// (version 1, modify index 20, in pool default).
func pinned(id string) func(*api.Job) {
	return func(j *api.Job) {
		j.Version, j.JobModifyIndex, j.NodePool, j.Status = ptr(uint64(1)), ptr(uint64(20)), ptr("default"), ptr("running")
		j.Meta[nomad.LeaseMeta] = id
	}
}

// suspendedBy is the version the planner's suspension under lease id
// registered (version 2, count 0, dead, back in the pending pool).
func suspendedBy(id string) func(*api.Job) {
	return func(j *api.Job) {
		j.Version, j.JobModifyIndex, j.Status, j.NodePool = ptr(uint64(2)), ptr(uint64(30)), ptr("dead"), ptr(testPool)
		j.TaskGroups[0].Count = ptr(0)
		delete(j.Meta, nomad.LeaseMeta)
		j.Meta[nomad.SuspendedMeta] = id
	}
}

// resubmitted is a version the user registered over the pinned one.
func resubmitted(j *api.Job) {
	j.Version, j.JobModifyIndex, j.NodePool, j.Status = ptr(uint64(2)), ptr(uint64(40)), ptr(testPool), ptr("pending")
	delete(j.Meta, nomad.LeaseMeta)
}

// stopped is a job its user stopped.
func stopped(j *api.Job) { j.Stop = ptr(true); j.Status = ptr("dead") }

// leaseOf is lease id of job k on GPUs, granted a minute ago and pinned
// (version 1).
func leaseOf(k core.JobKey, id string, gpus ...string) lease.JobLease {
	return lease.JobLease{LeaseID: id, Namespace: k.Namespace, JobID: k.ID, NodeID: "n1", NodeName: "node-1", GPUs: gpus,
		GrantedAt: testNow.Add(-time.Minute), SubmitIndex: 10, Pinned: &lease.JobVersion{CreateIndex: 1, Version: 1}}
}

// revoking is l being taken back since 10 s ago, its suspension naming
// version 2 (the job's next after the pin).
func revoking(l lease.JobLease, resubmitted bool) lease.JobLease {
	l.Revoke = &lease.Revoke{Reason: "preempted by test", Since: testNow.Add(-10 * time.Second), Deadline: testNow.Add(20 * time.Second),
		Suspends: &lease.JobVersion{CreateIndex: 1, Version: 2}, Resubmitted: resubmitted}
	return l
}

// alloc is an allocation of the job on n1, created with its lease.
func alloc(status string) nomad.Alloc {
	a := nomad.Alloc{ID: "alloc-" + status, NodeID: "n1", ClientStatus: status, Created: testNow.Add(-time.Minute), Started: testNow.Add(-time.Minute)}
	if status != "running" {
		a.Finished = testNow.Add(-time.Second)
		a.Modified = a.Finished // when Nomad last changed it (marked it lost)
	}
	return a
}

// record is a job's record as the planner wrote it.
func record(k core.JobKey) lease.JobRecord {
	return lease.JobRecord{Namespace: k.Namespace, JobID: k.ID, FirstSubmit: testNow.Add(-time.Hour)}
}

// testPlanner is a planner with a stack and no Nomad or Consul, whose
// leases are named lease-1, lease-2, ...
func testPlanner(t *testing.T, st *stack.Stack) *Planner {
	p := New(Config{Stack: st, Now: func() time.Time { return testNow }})
	n := 0
	p.newLeaseID = func() (string, error) { n++; return fmt.Sprintf("lease-%d", n), nil }
	return p
}

// wantStatus is a job's status: its state, and words its reason has.
type wantStatus struct {
	state, reason string
}

type reconcileCase struct {
	name   string
	themis bool // a leasing policy (pending grants), else fifo
	world  func(t *testing.T, w *world)
	// steps are the plan's steps but the round's own (save-state,
	// carried-out, statuses), as "kind namespace/id".
	steps  []string
	status map[core.JobKey]wantStatus
	// check, when set, looks further at the plan.
	check func(t *testing.T, pl *plan)
}

func (tc reconcileCase) run(t *testing.T) {
	w := testWorld()
	tc.world(t, w)
	st := mustStack(t, "fifo", stack.Options{})
	if tc.themis {
		st = themisStack(t, "20s")
	}
	pl := testPlanner(t, st).reconcile(w)
	if pl.fatal != nil {
		t.Fatalf("fatal: %v", pl.fatal)
	}
	if err := joinErrs(pl.errs); err != "" {
		t.Fatalf("plan errors: %s", err)
	}
	var got []string
	for _, s := range pl.kinds() {
		if s != string(stepSaveState) && s != string(stepCarriedOut) && s != string(stepStatuses) {
			got = append(got, s)
		}
	}
	if !slices.Equal(got, tc.steps) {
		t.Errorf("steps:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.steps, "\n  "))
	}
	for k, want := range tc.status {
		st, ok := pl.status[k]
		switch {
		case !ok && want.state != "":
			t.Errorf("%s: no status, want %s", k, want.state)
		case st.State != want.state || !strings.Contains(st.Reason, want.reason):
			t.Errorf("%s: status %s (%q), want %s (with %q)", k, st.State, st.Reason, want.state, want.reason)
		}
	}
	if tc.check != nil {
		tc.check(t, pl)
	}
}

func joinErrs(errs []error) string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "; ")
}

// stepOf is the plan's first step of a kind for a job.
func stepOf(t *testing.T, pl *plan, kind stepKind, k core.JobKey) step {
	t.Helper()
	for _, s := range pl.steps {
		if s.Kind == kind && s.Job == k {
			return s
		}
	}
	t.Fatalf("no %s step for %s in %v", kind, k, pl.kinds())
	return step{}
}

// The revoke path, one step per round as Consul and Nomad stand: a lease
// marked as taken back has its job suspended (the version the suspension
// registers recorded first when the mark does not name it), is held while
// the job's allocation runs, and is released with the job's service
// recorded once it is terminal; a job purged meanwhile has the lease
// released and its record dropped.
func TestReconcileRevokePath(t *testing.T) {
	cases := []reconcileCase{{
		name: "marked: suspend, the GPUs held for the job it makes room for",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 4, pinned(leaseA)), queued(t, "b", 4)}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1", "g2", "g3"), false)
			w.store.records[keyA], w.store.records[keyB] = record(keyA), record(keyB)
		},
		// b waits at the version its user submitted: held.
		steps: []string{"suspend default/a", "put-record default/b", "hold default/b"},
		status: map[core.JobKey]wantStatus{
			keyA: {"revoking", "preempted by test"},
			keyB: {"queued", "waiting for default/a to stop"},
		},
	}, {
		name: "marked by a planner that did not record the suspension's version",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 4, pinned(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			l := revoking(leaseOf(keyA, leaseA, "g0", "g1", "g2", "g3"), false)
			l.Revoke.Suspends = nil
			w.store.leases[keyA] = l
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"set-versions default/a", "suspend default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "preempted by test"}},
		check: func(t *testing.T, pl *plan) {
			if v := stepOf(t, pl, stepSetVersions, keyA).Lease.Revoke.Suspends; v == nil || v.Version != 2 {
				t.Errorf("set-versions records %v, want version 2", v)
			}
		},
	}, {
		name: "suspended, still checkpointing: nothing to write, held",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 4, pinned(leaseA), suspendedBy(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1", "g2", "g3"), false)
			w.store.records[keyA] = record(keyA)
		},
		steps:  nil,
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "preempted by test"}},
	}, {
		name: "suspended, allocation terminal: released with its service, the GPUs granted in the same round",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 4, pinned(leaseA), suspendedBy(leaseA)), queued(t, "b", 4)}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("complete")}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1", "g2", "g3"), false)
			w.store.records[keyA], w.store.records[keyB] = record(keyA), record(keyB)
		},
		// a's suspension is its hold from the release on: tagged.
		steps: []string{"release default/a", "grant default/b", "tag default/a"},
		status: map[core.JobKey]wantStatus{
			keyA: {"suspended", ""},
			keyB: {"granted", ""},
		},
		check: func(t *testing.T, pl *plan) {
			rec := stepOf(t, pl, stepRelease, keyA).Record
			if rec == nil || rec.Preemptions != 1 || rec.LastLease != leaseA || rec.Suspended == nil || rec.Suspended.Version != 2 || rec.Attained != 59*4 {
				t.Errorf("release writes record %+v; want one preemption, lease %s, suspended version 2, 59 s on 4 GPUs", rec, leaseA)
			}
			if h := rec.Held; h == nil || h.ID != leaseA || h.Version.Version != 2 || h.Reason != "preempted by test" {
				t.Errorf("release records hold %+v; want lease %s's suspension (version 2) as the hold", h, leaseA)
			}
			if d := stepOf(t, pl, stepTag, keyA).Why; !strings.HasPrefix(d, "suspended: preempted by test") {
				t.Errorf("tag description %q, want it to start with the suspension's reason", d)
			}
		},
	}, {
		name: "resubmission revoked, allocation terminal: released without counting a preemption",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 4, pinned(leaseA), suspendedBy(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("complete")}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1", "g2", "g3"), true)
			w.store.records[keyA] = record(keyA)
		},
		steps: []string{"release default/a", "grant default/a"},
		check: func(t *testing.T, pl *plan) {
			if rec := stepOf(t, pl, stepRelease, keyA).Record; rec == nil || rec.Preemptions != 0 {
				t.Errorf("release writes record %+v; want no preemption", rec)
			}
		},
	}, {
		name: "job purged while revoking: released, its record dropped",
		world: func(t *testing.T, w *world) {
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1"), false)
			w.store.records[keyA] = record(keyA)
		},
		steps: []string{"release default/a", "drop-record default/a"},
	}, {
		name: "job stopped by its user while revoking: released, its record dropped",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), stopped)}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("complete")}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1"), false)
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"release default/a", "drop-record default/a"},
		status: map[core.JobKey]wantStatus{keyA: {StateFinished, ""}},
	}, {
		name: "lost allocation: the lease taken back and suspended, held (lost.go)",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("lost")}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyA] = record(keyA)
		},
		// Its job is not classified again this round: the suspension is
		// read next round. The lease stays until the node reports the
		// allocation stopped or the lost bound passes (lost_test.go).
		steps:  []string{"revoke default/a", "suspend default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "was lost with the node"}},
		check: func(t *testing.T, pl *plan) {
			rv := stepOf(t, pl, stepRevoke, keyA).Revoke
			if !strings.Contains(rv.Reason, "was lost") || rv.Suspends == nil || rv.Suspends.Version != 2 || !rv.Deadline.Equal(testNow.Add(testGrace)) {
				t.Errorf("revoke %+v; want the lost allocation, suspending version 2, the grace period's deadline", rv)
			}
		},
	}, {
		name: "gang missing a part past the place timeout: taken back whole",
		world: func(t *testing.T, w *world) {
			n2 := core.Node{ID: "n2", Name: "node-2", Schedulable: true, GPUs: []core.GPU{{ID: "h0", Healthy: true}, {ID: "h1", Healthy: true}}}
			w.snap.Nodes = append(w.snap.Nodes, n2)
			w.snap.Pools["n2"] = "default"
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 4, pinned(leaseA), func(j *api.Job) { j.TaskGroups[0].Count = ptr(2) })}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			l := leaseOf(keyA, leaseA, "g0", "g1", "h0", "h1")
			l.GrantedAt = testNow.Add(-10 * time.Minute)
			l.Parts = []lease.Part{{NodeID: "n1", NodeName: "node-1", GPUs: []string{"g0", "g1"}}, {NodeID: "n2", NodeName: "node-2", GPUs: []string{"h0", "h1"}}}
			w.store.leases[keyA] = l
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"revoke default/a", "suspend default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "gang incomplete"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// A lease whose job holds it at a version the planner did not register
// (its user resubmitted it) is taken back like a preemption while the old
// version runs, released at once when it has stopped; a lease granted but
// never pinned is pinned; a lease written before planners recorded
// versions has its version recorded.
func TestReconcileLeasesOfChangedJobs(t *testing.T) {
	cases := []reconcileCase{{
		name: "resubmitted while running: revoked, not as a preemption",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), resubmitted)}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"revoke default/a", "suspend default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "job resubmitted"}},
		check: func(t *testing.T, pl *plan) {
			if rv := stepOf(t, pl, stepRevoke, keyA).Revoke; !rv.Resubmitted || rv.Suspends == nil || rv.Suspends.Version != 3 {
				t.Errorf("revoke %+v; want a resubmission suspending version 3", rv)
			}
		},
	}, {
		name: "resubmitted after the old version stopped: the stale lease released, the new version queued and granted",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), resubmitted)}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("complete")}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"release default/a", "grant default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"granted", ""}},
		check: func(t *testing.T, pl *plan) {
			if s := stepOf(t, pl, stepRelease, keyA); s.Record != nil || s.Why != "job resubmitted" {
				t.Errorf("release %+v; want no record written, why \"job resubmitted\"", s)
			}
			if g := stepOf(t, pl, stepGrant, keyA); g.Lease.LeaseID != "lease-1" || g.Lease.SubmitIndex != 40 || g.Lease.Pinned.Version != 3 || g.Pool != "default" {
				t.Errorf("grant %+v; want lease-1 at submit index 40, pinning version 3 into pool default", g.Lease)
			}
		},
	}, {
		name: "granted but never pinned: pinned",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2)}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"pin default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"granted", ""}},
		check: func(t *testing.T, pl *plan) {
			if s := stepOf(t, pl, stepPin, keyA); s.Pool != "default" || s.PoolErr != nil || s.Lease.LeaseID != leaseA {
				t.Errorf("pin %+v; want lease %s into pool default", s, leaseA)
			}
		},
	}, {
		name: "granted but never pinned, the node gone from Nomad: the pin fails, the lease stands",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2)}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyA] = record(keyA)
			delete(w.snap.Pools, "n1")
		},
		steps: []string{"pin default/a"},
		check: func(t *testing.T, pl *plan) {
			if s := stepOf(t, pl, stepPin, keyA); s.PoolErr == nil {
				t.Errorf("pin %+v; want the missing node as its error", s)
			}
		},
	}, {
		name: "a lease from before recorded versions: its version recorded once",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			l := leaseOf(keyA, leaseA, "g0", "g1")
			l.Pinned = nil
			w.store.leases[keyA] = l
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"set-versions default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"granted", ""}},
		check: func(t *testing.T, pl *plan) {
			if v := stepOf(t, pl, stepSetVersions, keyA).Lease.Pinned; v == nil || v.Version != 1 {
				t.Errorf("set-versions records %v, want version 1", v)
			}
		},
	}, {
		name: "submitted outside the pending pool: adopted, its record created",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, func(j *api.Job) { j.NodePool = ptr("default") })}
		},
		// Held: moved into the pending pool at count 0, its record of
		// the hold (and of the job) written first, in one write.
		steps:  []string{"put-record default/a", "hold default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"queued", "moved to node pool " + testPool}},
		check: func(t *testing.T, pl *plan) {
			h := stepOf(t, pl, stepPutRecord, keyA).Record.Held
			if h == nil || h.Version.Version != 1 || h.Counts["g"] != 1 || h.Reason != lease.HoldQueued || h.ID == "" {
				t.Errorf("record's hold %+v; want version 1, counts g=1, queued", h)
			}
		},
	}, {
		name: "first seen: its record created, then granted",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2)}
		},
		steps:  []string{"put-record default/a", "grant default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"granted", ""}},
	}, {
		name: "finished: the lease released, the record dropped",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), func(j *api.Job) { j.Status = ptr("dead") })}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("complete")}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"learn default/a", "release default/a", "drop-record default/a"},
		status: map[core.JobKey]wantStatus{keyA: {StateFinished, ""}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// Pending grants (Themis): one that no longer stands is withdrawn, for
// each reason pendingStale gives and for a job gone from Nomad; one whose
// GPUs are free is carried out (leased, then its record deleted), also in
// the round that releases them; one still waiting shows what for.
func TestReconcilePendingPath(t *testing.T) {
	pend := func(w *world, k core.JobKey, gpus ...string) {
		w.store.pending[k] = lease.Pending{Namespace: k.Namespace, JobID: k.ID, Node: "n1", GPUs: gpus, DecidedAt: testNow.Add(-5 * time.Second),
			Ends: testNow.Add(15 * time.Second)}
	}
	withdrawn := func(why string) func(t *testing.T, pl *plan) {
		return func(t *testing.T, pl *plan) {
			if s := stepOf(t, pl, stepWithdraw, keyA); !strings.Contains(s.Why, why) {
				t.Errorf("withdrawn for %q, want %q", s.Why, why)
			}
		}
	}
	cases := []reconcileCase{{
		name:   "the policy no longer leases",
		themis: false,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2)}
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g0", "g1")
		},
		steps: []string{"withdraw default/a", "grant default/a"},
		check: withdrawn("the policy no longer leases"),
	}, {
		name:   "job gone from Nomad",
		themis: true,
		world: func(t *testing.T, w *world) {
			pend(w, keyA, "g0", "g1")
		},
		steps: []string{"withdraw default/a"},
		check: withdrawn("job gone from Nomad"),
	}, {
		name:   "job finished",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, stopped)}
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g0", "g1")
		},
		steps: []string{"withdraw default/a", "drop-record default/a"},
		check: withdrawn("job finished or rejected"),
	}, {
		name:   "job rejected",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, func(j *api.Job) { j.TaskGroups[0].Count = ptr(3) })}
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g0", "g1")
		},
		steps:  []string{"withdraw default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"rejected", "count"}},
		check:  withdrawn("job finished or rejected"),
	}, {
		name:   "job holds a lease (carried out by a planner that stopped before deleting it)",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g0", "g1")
		},
		steps:  []string{"withdraw default/a", "renew default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"granted", ""}},
		check:  withdrawn("job holds a lease"),
	}, {
		name:   "job resubmitted while its old version checkpoints",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), resubmitted)}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1"), true)
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g2", "g3")
		},
		// The resubmitted version is not the suspension's: it is
		// suspended in its turn.
		steps: []string{"set-versions default/a", "suspend default/a", "withdraw default/a"},
		check: withdrawn("job resubmitted"),
	}, {
		name:   "a GPU Nomad no longer reports",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2)}
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g3", "gone")
		},
		steps: []string{"withdraw default/a", "grant default/a", "auction"},
		check: withdrawn("GPU gone is on no node"),
	}, {
		name:   "a GPU leased to another job",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2), queued(t, "b", 2, pinned(leaseB))}
			w.snap.Allocs[keyB] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyB] = leaseOf(keyB, leaseB, "g0", "g1")
			w.store.records[keyA], w.store.records[keyB] = record(keyA), record(keyB)
			pend(w, keyA, "g1", "g2")
		},
		steps: []string{"withdraw default/a", "grant default/a", "renew default/b", "auction"},
		check: withdrawn("GPU g1 is leased to default/b"),
	}, {
		name:   "its GPUs free: carried out",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2)}
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g0", "g1")
		},
		steps:  []string{"grant default/a", "drop-pending default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"granted", ""}},
		check: func(t *testing.T, pl *plan) {
			if l := stepOf(t, pl, stepGrant, keyA).Lease; !slices.Equal(l.GPUs, []string{"g0", "g1"}) {
				t.Errorf("granted %v, want the pending grant's g0, g1", l.GPUs)
			}
		},
	}, {
		name:   "its GPUs still held by a job checkpointing: waits",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2), queued(t, "b", 2, pinned(leaseB), suspendedBy(leaseB))}
			w.snap.Allocs[keyB] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyB] = revoking(leaseOf(keyB, leaseB, "g0", "g1"), false)
			w.store.records[keyA], w.store.records[keyB] = record(keyA), record(keyB)
			pend(w, keyA, "g0", "g1")
		},
		steps: []string{"put-record default/a", "hold default/a"},
		status: map[core.JobKey]wantStatus{
			keyA: {"queued", "waiting for default/b to stop (checkpointing"},
			keyB: {"revoking", ""},
		},
	}, {
		name:   "its GPUs released this round: the release, then the grant",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2), queued(t, "b", 2, pinned(leaseB), suspendedBy(leaseB))}
			w.snap.Allocs[keyB] = []nomad.Alloc{alloc("complete")}
			w.store.leases[keyB] = revoking(leaseOf(keyB, leaseB, "g0", "g1"), false)
			w.store.records[keyA], w.store.records[keyB] = record(keyA), record(keyB)
			pend(w, keyA, "g0", "g1")
		},
		// b, released, is granted the two GPUs left in the same round's
		// auction.
		steps: []string{"release default/b", "grant default/b", "grant default/a", "drop-pending default/a", "auction"},
		status: map[core.JobKey]wantStatus{
			keyA: {"granted", ""},
			keyB: {"granted", ""},
		},
		check: func(t *testing.T, pl *plan) {
			a, b := stepOf(t, pl, stepGrant, keyA).Lease.GPUs, stepOf(t, pl, stepGrant, keyB).Lease.GPUs
			if !slices.Equal(a, []string{"g0", "g1"}) || !slices.Equal(b, []string{"g2", "g3"}) {
				t.Errorf("granted a %v and b %v; want a its pending g0, g1 and b the others", a, b)
			}
		},
	}, {
		name:   "moved: its own allocation checkpoints first",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), suspendedBy(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1"), false)
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g2", "g3")
		},
		steps:  nil,
		status: map[core.JobKey]wantStatus{keyA: {"queued", "moving: checkpointing before it resumes on node-1"}},
	}, {
		name:   "moved, its old allocation stopped: released, then leased where it moves",
		themis: true,
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), suspendedBy(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("complete")}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1"), false)
			w.store.records[keyA] = record(keyA)
			pend(w, keyA, "g2", "g3")
		},
		steps:  []string{"release default/a", "grant default/a", "drop-pending default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"granted", ""}},
		check: func(t *testing.T, pl *plan) {
			if l := stepOf(t, pl, stepGrant, keyA).Lease; !slices.Equal(l.GPUs, []string{"g2", "g3"}) {
				t.Errorf("granted %v, want where it moved: g2, g3", l.GPUs)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// A job whose planner records cannot be used is set aside: nothing is
// planned for it, the GPUs its lease names are held (no job is placed on
// them), and the waiting jobs say so.
func TestReconcileSetAside(t *testing.T) {
	reconcileCase{
		name: "set aside",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA)), queued(t, "b", 4)}
			w.snap.Allocs[keyA] = []nomad.Alloc{alloc("running")}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyB] = record(keyB)
			w.store.aside[keyA] = "its job record in Consul cannot be used"
		},
		steps: []string{"put-record default/b", "hold default/b"},
		status: map[core.JobKey]wantStatus{
			keyA: {StateUnreadable, "its job record"},
			keyB: {"queued", "2 GPUs are held by jobs set aside as unreadable (default/a)"},
		},
	}.run(t)
}

// The round's own steps close every plan, in order: the policy's state
// is recorded before the decision's first write, and the statuses are
// written after the last of them but before the records of jobs gone are
// dropped.
func TestReconcileRoundSteps(t *testing.T) {
	w := testWorld()
	w.snap.Jobs = []*nomad.Job{queued(t, "a", 2)}
	w.store.records[keyB] = record(keyB) // b left Nomad
	pl := testPlanner(t, mustStack(t, "fifo", stack.Options{})).reconcile(w)
	want := []string{"put-record default/a", "save-state", "grant default/a", "carried-out", "statuses", "drop-record default/b"}
	if got := pl.kinds(); !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	if len(w.store.records) != 1 || len(w.store.leases) != 0 || w.snap.Jobs[0].Err != nil {
		t.Errorf("reconcile changed the world it read: records %v, leases %v", w.store.records, w.store.leases)
	}
}

// The applier's dependencies: a step that did not happen skips the later
// steps of its job and the grants of the GPUs its release was to free;
// other jobs' steps go on.
func TestApplierSkipsWhatDependsOnAFailedStep(t *testing.T) {
	a := &applier{failed: map[core.JobKey]bool{}, stale: map[core.JobKey]bool{}, notFreed: map[string]bool{}}
	release := step{Kind: stepRelease, Job: keyB, Lease: leaseOf(keyB, leaseB, "g0", "g1")}
	a.skip(release)
	cases := []struct {
		s       step
		blocked bool
	}{
		{step{Kind: stepDropRecord, Job: keyB}, true},
		{step{Kind: stepGrant, Job: keyA, Lease: leaseOf(keyA, "new", "g1", "g2")}, true},
		{step{Kind: stepGrant, Job: keyA, Lease: leaseOf(keyA, "new", "g2", "g3")}, false},
		{step{Kind: stepPend, Job: keyA, Pending: lease.Pending{GPUs: []string{"g0"}}}, false},
		{step{Kind: stepSaveState}, false},
	}
	for _, tc := range cases {
		if got := a.blocked(tc.s); got != tc.blocked {
			t.Errorf("%s %s on %v: blocked %v, want %v", tc.s.Kind, tc.s.Job, tc.s.Lease.GPUs, got, tc.blocked)
		}
	}
	// b's planned status (released) is untrue; a job whose adoption
	// failed keeps its planned one (rejected, or moved to the pool).
	a.skip(step{Kind: stepAdopt, Job: keyA})
	if !a.stale[keyB] || a.stale[keyA] || !a.failed[keyA] {
		t.Errorf("stale %v, failed %v; want b stale, a failed but not stale", a.stale, a.failed)
	}
}
