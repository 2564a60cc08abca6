package planner

import (
	"context"
	"errors"
	"github.com/themis-nomad/themis/planner/plannertest"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// A planner killed after any number of writes during a FitGpp preemption is
// finished by the next one: the victim is suspended once and preempted
// once, no task ever runs without its lease, the TE job runs, and the
// victim resumes with its restart count.
func TestRevokeSurvivesACrashAtEveryStep(t *testing.T) {
	for crashAfter := 0; crashAfter <= 8; crashAfter++ {
		t.Run("after "+itoa(crashAfter)+" writes", func(t *testing.T) {
			ctx := context.Background()
			clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
			fn, fs := plannertest.NewNomad(&clock, 8), plannertest.NewStore()
			policy, err := policies.NewFitGpp(core.Knobs{})
			if err != nil {
				t.Fatal(err)
			}
			newPlanner := func(b *plannertest.Budget) *Planner {
				fn.Crash, fs.Crash = b, b
				return New(Config{Nomad: fn, Store: fs, Stack: stack.Of(policy), Now: func() time.Time { return clock }, MaxKillTimeout: time.Hour})
			}
			round := func(p *Planner, when string) error {
				err := p.Reconcile(ctx)
				plannertest.CheckNoTaskWithoutLease(t, fn, fs, when)
				fn.Settle()
				clock = clock.Add(time.Second)
				return err
			}
			p := newPlanner(nil)
			fn.Submit("be", 8, "be", "10s")
			for range 2 {
				if err := round(p, "be starts"); err != nil {
					t.Fatal(err)
				}
			}
			if len(fn.Running("be")) != 1 {
				t.Fatalf("be does not run: %+v", fn.Allocs)
			}
			clock = clock.Add(30 * time.Second)
			fn.Submit("te", 2, "te", "10s")

			crashy := newPlanner(&plannertest.Budget{Left: crashAfter})
			for range 6 {
				if err := round(crashy, "crashy planner"); errors.Is(err, plannertest.ErrCrash) {
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
			if len(fn.Running("te")) != 1 || len(fn.Running("be")) != 0 {
				t.Fatalf("te runs %d, be runs %d; want te alone", len(fn.Running("te")), len(fn.Running("be")))
			}
			if fn.Suspensions != 1 {
				t.Errorf("be suspended %d times, want 1", fn.Suspensions)
			}
			be := core.JobKey{Namespace: "default", ID: "be"}
			if r := fs.JobRecords[be]; r.Preemptions != 1 || r.Executed < 30 {
				t.Errorf("be's record %+v: want 1 preemption and at least 30 s executed", r)
			}
			if st := fs.JobStatuses[be]; st.State != "suspended" {
				t.Errorf("be's status %+v, want suspended", st)
			}
			if _, ok := fn.Tagged(be); !ok {
				t.Error("be suspended, its held version not tagged: Nomad's GC would purge it")
			}

			fn.Finish("te")
			for range 3 {
				if err := round(next, "te done"); err != nil {
					t.Fatal(err)
				}
			}
			if len(fn.Running("be")) != 1 {
				t.Fatal("be did not resume after te finished")
			}
			if got := fn.Jobs[be].Meta[nomad.RestartCountMeta]; got != "1" {
				t.Errorf("be resumed with restart count %q, want 1", got)
			}
			if _, ok := fn.Tagged(be); ok {
				t.Error("be resumed, its held version still tagged")
			}
			if _, ok := fs.JobRecords[core.JobKey{Namespace: "default", ID: "te"}]; ok {
				t.Error("te's record outlived te")
			}
		})
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// The hold of a queued job survives a planner killed after any of its
// writes (the record, the registration at count 0, the tag): the next
// planner holds the job once, tags it, and runs it when its GPUs free, its
// tag removed then.
func TestHoldSurvivesACrashAtEveryStep(t *testing.T) {
	for crashAfter := 0; crashAfter <= 4; crashAfter++ {
		t.Run("after "+itoa(crashAfter)+" writes", func(t *testing.T) {
			h := newHarness(t, 8, stack.Of(policies.FIFO{}))
			h.Nomad.Submit("a", 8, "be", "10s")
			h.Round("a runs")
			h.Round("a runs")
			h.Nomad.Submit("b", 8, "be", "10s")
			b := &plannertest.Budget{Left: crashAfter}
			h.Nomad.Crash, h.Store.Crash = b, b
			if err := h.P.Reconcile(context.Background()); err != nil && !errors.Is(err, plannertest.ErrCrash) {
				t.Fatal(err)
			}
			h.Nomad.Crash, h.Store.Crash = nil, nil
			h.Restart()
			for range 3 {
				h.Round("next planner")
			}
			kb := core.JobKey{Namespace: "default", ID: "b"}
			if h.Nomad.Holds != 1 {
				t.Errorf("b held %d times, want once", h.Nomad.Holds)
			}
			if _, ok := h.Nomad.Tagged(kb); !ok || h.Store.JobRecords[kb].Held == nil {
				t.Fatalf("b not held and tagged: tag %v, record %+v", ok, h.Store.JobRecords[kb])
			}
			h.Nomad.Finish("a")
			for range 3 {
				h.Round("a done")
			}
			if len(h.Nomad.Running("b")) != 1 {
				t.Fatal("b does not run after a finished")
			}
			if _, ok := h.Nomad.Tagged(kb); ok || h.Store.JobRecords[kb].Held != nil {
				t.Errorf("b runs, still held: tag %v, record %+v", ok, h.Store.JobRecords[kb].Held)
			}
		})
	}
}
