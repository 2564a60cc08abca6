package plannertest

import (
	"context"
	"testing"
	"time"
)

// Reconciler is what the harness drives: the planner (planner.Planner), or
// anything that runs rounds against a Nomad and a Store.
type Reconciler interface {
	Reconcile(ctx context.Context) error
}

// Harness is a fake cluster with its planner, driven round by round: each
// Round reconciles once, checks CheckNoTaskWithoutLease, lets the
// allocations that checkpointed end (Nomad.Settle) and moves the clock a
// second on. Restart replaces the planner with a new one over the same
// fakes (a crash and restart); setting Nomad.Crash and Store.Crash to a
// Budget kills a planner after that many writes.
type Harness[P Reconciler] struct {
	T     testing.TB
	Clock time.Time
	Nomad *Nomad
	Store *Store
	// P is the planner; Start builds it (at Restart) over the harness's
	// fakes and clock.
	P     P
	Start func(h *Harness[P]) P
}

// Epoch is when a harness's clock starts.
var Epoch = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// NewHarness is a harness over a cluster of nodes nodes of gpus GPUs each
// (NewCluster), whose planner start builds; it starts one.
func NewHarness[P Reconciler](t testing.TB, nodes, gpus int, start func(h *Harness[P]) P) *Harness[P] {
	h := &Harness[P]{T: t, Clock: Epoch, Store: NewStore(), Start: start}
	h.Nomad = NewCluster(&h.Clock, nodes, gpus)
	h.Restart()
	return h
}

// Restart replaces the planner with a new one (a crash and restart).
func (h *Harness[P]) Restart() { h.P = h.Start(h) }

// Round runs one reconcile, checks that no task runs without its lease,
// lets Nomad's stopping allocations end, and moves the clock a second on.
// A reconcile error fails the test.
func (h *Harness[P]) Round(when string) {
	h.T.Helper()
	if err := h.P.Reconcile(context.Background()); err != nil {
		h.T.Fatalf("%s: %v", when, err)
	}
	CheckNoTaskWithoutLease(h.T, h.Nomad, h.Store, when)
	h.Nomad.Settle()
	h.Clock = h.Clock.Add(time.Second)
}
