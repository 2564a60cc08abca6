package planner

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// lostAlloc is job a's allocation on n1, which Nomad marked lost ago.
func lostAlloc(ago time.Duration) nomad.Alloc {
	a := alloc("lost")
	a.Modified = testNow.Add(-ago)
	return a
}

// A lost allocation is not a dead one (lost.go): its lease, and so its
// GPUs, are held until the node reports the allocation terminal or the
// lost bound (stop_on_client_after + kill timeout + margin after Nomad
// marked it lost; testGrace as the kill timeout here: 30 + 30 + 10 s)
// passes. Grants on its GPUs wait, saying why.
func TestLostAllocationHoldsItsGPUs(t *testing.T) {
	bound := nomad.DefaultStopOnClientAfter + testGrace + LostMargin
	suspended := func(t *testing.T, w *world) {
		w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), suspendedBy(leaseA))}
		w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1"), false)
		w.store.records[keyA] = record(keyA)
	}
	cases := []reconcileCase{{
		name: "just lost: taken back and suspended, not released",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA))}
			w.snap.Allocs[keyA] = []nomad.Alloc{lostAlloc(time.Second)}
			w.store.leases[keyA] = leaseOf(keyA, leaseA, "g0", "g1")
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"revoke default/a", "suspend default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "was lost with the node and may still run there"}},
		check: func(t *testing.T, pl *plan) {
			want := testNow.Add(-time.Second + bound)
			if !pl.r.wake.Equal(want) {
				t.Errorf("round wakes at %s, want at the lost bound %s", pl.r.wake, want)
			}
		},
	}, {
		name: "lost, node still down, within the bound: held",
		world: func(t *testing.T, w *world) {
			suspended(t, w)
			w.snap.Nodes[0].Schedulable = false
			w.snap.Allocs[keyA] = []nomad.Alloc{lostAlloc(bound - time.Second)}
		},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "until the node reports it stopped"}},
	}, {
		name: "lost, past the bound: released (the client stopped it by itself)",
		world: func(t *testing.T, w *world) {
			suspended(t, w)
			w.snap.Allocs[keyA] = []nomad.Alloc{lostAlloc(bound + time.Second)}
		},
		steps: []string{"release default/a", "grant default/a"},
	}, {
		name: "the node came back and runs it again (its restored client): held",
		world: func(t *testing.T, w *world) {
			suspended(t, w)
			a := lostAlloc(time.Second)
			a.ClientStatus = "running"
			w.snap.Allocs[keyA] = []nomad.Alloc{a}
		},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "preempted by test"}},
	}, {
		name: "the node came back and reported it complete: released",
		world: func(t *testing.T, w *world) {
			suspended(t, w)
			a := lostAlloc(time.Second)
			a.ClientStatus = "complete"
			w.snap.Allocs[keyA] = []nomad.Alloc{a}
		},
		steps: []string{"release default/a", "grant default/a"},
	}, {
		name: "a lost allocation of an earlier run on another node does not hold this lease",
		world: func(t *testing.T, w *world) {
			suspended(t, w)
			a := lostAlloc(time.Second)
			a.NodeID = "n9"
			w.snap.Allocs[keyA] = []nomad.Alloc{a, alloc("complete")}
		},
		steps: []string{"release default/a", "grant default/a"},
	}, {
		name: "a job granted the lost allocation's GPUs waits for them, saying why",
		world: func(t *testing.T, w *world) {
			suspended(t, w)
			w.snap.Allocs[keyA] = []nomad.Alloc{lostAlloc(time.Second)}
			w.snap.Jobs = append(w.snap.Jobs, queued(t, "b", 4))
		},
		// b waits, so it is held at count 0 (hold.go) until the GPUs are free.
		steps: []string{"put-record default/b", "hold default/b"},
		status: map[core.JobKey]wantStatus{
			keyA: {"revoking", "was lost with the node"},
			keyB: {"queued", "waiting for default/a to stop (its allocation was lost with its node"},
		},
	}, {
		name: "a job stopped by its user, its allocation lost: held until the bound",
		world: func(t *testing.T, w *world) {
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 2, pinned(leaseA), stopped)}
			w.snap.Allocs[keyA] = []nomad.Alloc{lostAlloc(time.Second)}
			w.store.leases[keyA] = revoking(leaseOf(keyA, leaseA, "g0", "g1"), false)
			w.store.records[keyA] = record(keyA)
		},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "was lost with the node"}},
	}, {
		name: "a gang whose only remaining part is lost: taken back, held",
		world: func(t *testing.T, w *world) {
			n2 := core.Node{ID: "n2", Name: "node-2", Schedulable: true, GPUs: []core.GPU{{ID: "h0", Healthy: true}, {ID: "h1", Healthy: true}}}
			w.snap.Nodes = append(w.snap.Nodes, n2)
			w.snap.Pools["n2"] = "default"
			w.snap.Jobs = []*nomad.Job{queued(t, "a", 4, pinned(leaseA), func(j *api.Job) { j.TaskGroups[0].Count = ptr(2) })}
			other := alloc("failed")
			other.NodeID = "n2"
			w.snap.Allocs[keyA] = []nomad.Alloc{lostAlloc(time.Second), other}
			l := leaseOf(keyA, leaseA, "g0", "g1", "h0", "h1")
			l.Parts = []lease.Part{{NodeID: "n1", NodeName: "node-1", GPUs: []string{"g0", "g1"}}, {NodeID: "n2", NodeName: "node-2", GPUs: []string{"h0", "h1"}}}
			w.store.leases[keyA] = l
			w.store.records[keyA] = record(keyA)
		},
		steps:  []string{"revoke default/a", "suspend default/a"},
		status: map[core.JobKey]wantStatus{keyA: {"revoking", "gang broken: its part on node-1 is lost"}},
		check: func(t *testing.T, pl *plan) {
			if st := pl.status[keyA]; !strings.Contains(st.Reason, "until the node reports it stopped") {
				t.Errorf("status %q does not say the GPUs wait for the node", st.Reason)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// A one-node job whose node is lost, against the in-memory Nomad (whose
// lost allocations' tasks run on, as Orphan, and the harness checks after
// every round that each such task keeps its lease): the lease is held
// while the node is away; a node that comes back reports the allocation
// complete and the job runs again; a node that does not come back holds it
// until the bound, and the job re-queues elsewhere. (A client killed
// outright and started again past the bound still runs the old task until
// it kills it: the driver keeps another allocation off those GPUs then,
// driver/gpuholds.go.)
func TestLostNodeHoldsTheLeaseUntilItReports(t *testing.T) {
	const grace = 5 * time.Second
	bound := nomad.DefaultStopOnClientAfter + grace + LostMargin
	for _, tc := range []struct {
		name string
		// stopAfter is when the lost node's client stops the task by
		// itself (0: killed, never); back says the node comes back after
		// down.
		stopAfter time.Duration
		back      bool
		down      time.Duration
		// otherNode says the job runs again on the other node.
		otherNode bool
	}{
		{name: "client killed, restarted 15 s later", back: true, down: 15 * time.Second},
		{name: "client cut off, back past the bound", stopAfter: nomad.DefaultStopOnClientAfter + grace, back: true, down: bound + 5*time.Second, otherNode: true},
		{name: "client cut off, never back", stopAfter: nomad.DefaultStopOnClientAfter + grace, down: bound + 5*time.Second, otherNode: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newClusterHarness(t, 2, 8, mustStack(t, "fifo", stack.Options{}))
			h.Nomad.Submit("solo", 8, "be", grace.String())
			h.Round("grant")
			k := core.JobKey{Namespace: "default", ID: "solo"}
			first := h.Store.JobLeases[k]
			// The other node is busy until the lost one's bound is near.
			h.Nomad.Submit("other", 8, "be", grace.String())
			h.Round("other granted")
			h.Nomad.LoseNode(first.NodeID, tc.stopAfter)
			start := h.Clock
			for h.Clock.Sub(start) < tc.down {
				h.Round("node away")
				if h.Clock.Sub(start) < bound-time.Second {
					if l := h.Store.JobLeases[k]; l.LeaseID != first.LeaseID {
						t.Fatalf("after %s: lease %+v, want %s held while the lost task may run", h.Clock.Sub(start), l, first.LeaseID)
					}
					if st := h.Store.JobStatuses[k]; !strings.Contains(st.Reason, "until the node reports it stopped") {
						t.Fatalf("after %s: status %+v does not say why it waits", h.Clock.Sub(start), st)
					}
				}
				if h.Clock.Sub(start) == bound-20*time.Second {
					h.Nomad.Finish("other")
				}
			}
			if tc.back {
				h.Nomad.NodeBack(first.NodeID)
			}
			for i := range 6 {
				h.Round("after " + strconv.Itoa(i))
			}
			l, ok := h.Store.JobLeases[k]
			if !ok || l.LeaseID == first.LeaseID || len(h.Nomad.Running("solo")) != 1 {
				t.Fatalf("lease %+v (status %+v): want solo running under a new lease", l, h.Store.JobStatuses[k])
			}
			if tc.otherNode == (l.NodeID == first.NodeID) {
				t.Errorf("solo runs again on %s (it ran on %s); want the other node: %v", l.NodeName, first.NodeName, tc.otherNode)
			}
		})
	}
}
