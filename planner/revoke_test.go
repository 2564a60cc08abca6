package planner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// checkNoTaskWithoutLease is invariant 1 seen from Nomad: every job with an
// allocation that is not terminal holds a lease (and the store keeps leases'
// GPUs disjoint), so no two running jobs share a GPU.
func checkNoTaskWithoutLease(t *testing.T, fn *fakeNomad, fs *fakeStore, when string) {
	t.Helper()
	for k, as := range fn.allocs {
		for _, a := range as {
			if !a.Terminal() {
				l, ok := fs.leases[k]
				if !ok {
					t.Fatalf("%s: %s has allocation %s %s but no lease", when, k, a.ID, a.ClientStatus)
				}
				if !l.OnNode(a.NodeID) {
					t.Fatalf("%s: %s has allocation %s on node %s, which its lease (%s) does not hold", when, k, a.ID, a.NodeID, l.NodeNames())
				}
			}
		}
	}
}

// A planner killed after any number of writes during a FitGpp preemption is
// finished by the next one: the victim is suspended once and preempted
// once, no task ever runs without its lease, the TE job runs, and the
// victim resumes with its restart count.
func TestRevokeSurvivesACrashAtEveryStep(t *testing.T) {
	for crashAfter := 0; crashAfter <= 8; crashAfter++ {
		t.Run("after "+itoa(crashAfter)+" writes", func(t *testing.T) {
			ctx := context.Background()
			clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
			fn, fs := newFakeNomad(&clock, 8), newFakeStore()
			policy, err := core.NewFitGpp(core.Knobs{})
			if err != nil {
				t.Fatal(err)
			}
			newPlanner := func(b *budget) *Planner {
				fn.crash, fs.crash = b, b
				return New(Config{Nomad: fn, Store: fs, Stack: stack.Of(policy), Now: func() time.Time { return clock }, MaxKillTimeout: time.Hour})
			}
			round := func(p *Planner, when string) error {
				err := p.Reconcile(ctx)
				checkNoTaskWithoutLease(t, fn, fs, when)
				fn.settle()
				clock = clock.Add(time.Second)
				return err
			}
			p := newPlanner(nil)
			fn.submit("be", 8, "be", "10s")
			for range 2 {
				if err := round(p, "be starts"); err != nil {
					t.Fatal(err)
				}
			}
			if len(fn.running("be")) != 1 {
				t.Fatalf("be does not run: %+v", fn.allocs)
			}
			clock = clock.Add(30 * time.Second)
			fn.submit("te", 2, "te", "10s")

			crashy := newPlanner(&budget{left: crashAfter})
			for range 6 {
				if err := round(crashy, "crashy planner"); errors.Is(err, errCrash) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			next := newPlanner(nil)
			for range 6 {
				if err := round(next, "next planner"); err != nil {
					t.Fatal(err)
				}
			}
			if len(fn.running("te")) != 1 || len(fn.running("be")) != 0 {
				t.Fatalf("te runs %d, be runs %d; want te alone", len(fn.running("te")), len(fn.running("be")))
			}
			if fn.suspend != 1 {
				t.Errorf("be suspended %d times, want 1", fn.suspend)
			}
			be := core.JobKey{Namespace: "default", ID: "be"}
			if r := fs.records[be]; r.Preemptions != 1 || r.Executed < 30 {
				t.Errorf("be's record %+v: want 1 preemption and at least 30 s executed", r)
			}
			if st := fs.statuses[be]; st.State != "suspended" {
				t.Errorf("be's status %+v, want suspended", st)
			}

			fn.finish("te")
			for range 3 {
				if err := round(next, "te done"); err != nil {
					t.Fatal(err)
				}
			}
			if len(fn.running("be")) != 1 {
				t.Fatal("be did not resume after te finished")
			}
			if got := fn.jobs[be].Meta[nomad.RestartCountMeta]; got != "1" {
				t.Errorf("be resumed with restart count %q, want 1", got)
			}
			if _, ok := fs.records[core.JobKey{Namespace: "default", ID: "te"}]; ok {
				t.Error("te's record outlived te")
			}
		})
	}
}

func itoa(i int) string { return string(rune('0' + i)) }
