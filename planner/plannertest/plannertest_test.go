package plannertest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// fatal is a testing.TB whose Fatalf stops the check and records why.
type fatal struct {
	testing.TB
	msg string
}

type stopped struct{}

func (f *fatal) Helper() {}
func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(stopped{})
}

// failsWith runs check against a recorder and returns what it failed with
// ("" when it passed).
func failsWith(t *testing.T, check func(tb testing.TB)) string {
	t.Helper()
	f := &fatal{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(stopped); !ok {
					panic(p)
				}
			}
		}()
		check(f)
	}()
	return f.msg
}

// The invariant check fails on a running allocation without a lease, and
// on one outside its lease's node; it passes once the lease is there.
func TestCheckNoTaskWithoutLeaseCatchesARogueTask(t *testing.T) {
	clock := Epoch
	n, s := NewCluster(&clock, 2, 4), NewStore()
	k := core.JobKey{Namespace: "default", ID: "a"}
	n.Allocs[k] = []*Alloc{{}}
	n.Allocs[k][0].ID, n.Allocs[k][0].NodeID, n.Allocs[k][0].ClientStatus = "alloc-1", "node-2", "running"
	check := func(tb testing.TB) { CheckNoTaskWithoutLease(tb, n, s, "now") }
	if msg := failsWith(t, check); msg == "" {
		t.Fatal("an allocation without a lease passed the check")
	}
	l := lease.JobLease{LeaseID: "l1", Namespace: "default", JobID: "a", NodeID: "node-1", NodeName: "gpu-node-1", GPUs: []string{"gpu-0-0"}}
	if err := s.Grant(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if msg := failsWith(t, check); msg == "" {
		t.Fatal("an allocation on a node its lease does not hold passed the check")
	}
	n.Allocs[k][0].NodeID = "node-1"
	if msg := failsWith(t, check); msg != "" {
		t.Fatalf("a leased allocation failed the check: %s", msg)
	}
}

// Store grants all or nothing: a GPU already leased is refused, and two
// leases never hold one GPU (CheckGPUsLeasedOnce catches one forced in).
func TestStoreGrantsAGPUOnce(t *testing.T) {
	s := NewStore()
	ctx := context.Background()
	a := lease.JobLease{LeaseID: "la", Namespace: "default", JobID: "a", NodeID: "node-1", GPUs: []string{"g0", "g1"}}
	b := lease.JobLease{LeaseID: "lb", Namespace: "default", JobID: "b", NodeID: "node-1", GPUs: []string{"g1", "g2"}}
	if err := s.Grant(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Grant(ctx, b); err == nil {
		t.Fatal("a grant of a GPU already leased succeeded")
	}
	if _, ok := s.JobLeases[core.JobKey{Namespace: "default", ID: "b"}]; ok {
		t.Fatal("a refused grant left a lease")
	}
	if msg := failsWith(t, func(tb testing.TB) { CheckGPUsLeasedOnce(tb, s) }); msg != "" {
		t.Fatalf("disjoint leases failed the check: %s", msg)
	}
	s.JobLeases[core.JobKey{Namespace: "default", ID: "b"}] = b // forced past Grant
	if msg := failsWith(t, func(tb testing.TB) { CheckGPUsLeasedOnce(tb, s) }); msg == "" {
		t.Fatal("two leases of one GPU passed the check")
	}
}

// A Budget lets n writes through, then every write fails with ErrCrash;
// no budget never fails.
func TestBudgetCrashesAfterNWrites(t *testing.T) {
	clock := Epoch
	n := NewNomad(&clock, 8)
	s := NewStore()
	b := &Budget{Left: 1}
	n.Crash, s.Crash = b, b
	ctx := context.Background()
	l := lease.JobLease{LeaseID: "l", Namespace: "default", JobID: "a", NodeID: "node-1", GPUs: []string{"gpu-0-0"}}
	if err := s.Grant(ctx, l); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := s.DeletePending(ctx, core.JobKey{Namespace: "default", ID: "a"}); !errors.Is(err, ErrCrash) {
		t.Fatalf("second write = %v, want ErrCrash", err)
	}
	var none *Budget
	if err := none.Spend(); err != nil {
		t.Fatalf("nil budget: %v", err)
	}
}
