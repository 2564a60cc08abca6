package planner

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/themis-nomad/themis/planner/plannertest"
	"strconv"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// themisStack builds the themis stack with a lease and any other knob
// settings, failing the test on error.
func themisStack(t *testing.T, lease string, set ...string) *stack.Stack {
	t.Helper()
	return mustStack(t, "themis", stack.Options{Knobs: mustKnobs(t, append([]string{"themis.lease=" + lease}, set...)...)})
}

// submitSweepAndBig submits a 4-job sweep of 2 GPUs and an 8-GPU app.
func submitSweepAndBig(f *plannertest.Nomad) {
	for i := range 4 {
		f.SubmitApp("sweep-"+strconv.Itoa(i), 2, "sweep")
	}
	f.SubmitApp("big", 8, "big")
}

// Themis live, round by round: three apps (one a 4-job sweep) on two
// 8-GPU nodes with a 60 s lease. Every lease key shows its end; the
// planner's next wake-up is the first lease end; at a lease end the round
// either renews a winner's lease in place (same lease, same allocation: no
// restart) or takes the GPUs back through the revoke path; the policy's
// memory survives a planner restart (TestRestartEquivalence/themis checks
// that in general).
func TestThemisLiveRounds(t *testing.T) {
	st := themisStack(t, "60s")
	if err := st.Live(); err != nil {
		t.Fatalf("themis refused live: %v", err)
	}
	h := newClusterHarness(t, 2, 8, st)
	submitSweepAndBig(h.Nomad)
	h.Nomad.SubmitApp("mid", 4, "mid")
	start := h.Clock
	h.Round("first auction")
	if len(h.Store.JobLeases) == 0 {
		t.Fatalf("nothing granted: %+v", h.Store.JobStatuses)
	}
	first := map[core.JobKey]string{}
	for k, l := range h.Store.JobLeases {
		if l.Ends.IsZero() || !l.Ends.After(start) || l.Ends.After(start.Add(60*time.Second)) {
			t.Fatalf("%s: lease ends %v, want within the 60 s lease after %v", k, l.Ends, start)
		}
		first[k] = l.LeaseID
	}
	if h.P.recheck.IsZero() || h.P.recheck.After(start.Add(60*time.Second)) {
		t.Fatalf("next round at %v, want the first lease end", h.P.recheck)
	}
	if len(h.Store.PolicyStates["themis"]) == 0 {
		t.Fatal("the policy's state was not recorded")
	}
	// The planner restarts; rounds go on to past every first lease end.
	h.Restart()
	allocs := map[core.JobKey]int{}
	for k := range first {
		allocs[k] = len(h.Nomad.Allocs[k])
	}
	for h.Clock.Before(start.Add(80 * time.Second)) {
		h.Round("lease ends")
		h.Clock = h.Clock.Add(4 * time.Second)
	}
	renewed, revoked, renewedLater := 0, 0, 0
	for k, id := range first {
		l, ok := h.Store.JobLeases[k]
		switch {
		case ok && l.LeaseID == id && l.Revoke == nil:
			renewed++
			// The key shows the policy's end: renewed, or (the auction's
			// reservation gathering GPUs for a gang) still over, its GPUs
			// held until the reservation completes, as in the simulator.
			if e, _ := h.P.stack().Policy.(core.LeaseEnder).LeaseEnd(k); !e.Equal(l.Ends) {
				t.Errorf("%s: lease key ends %v, the policy says %v", k, l.Ends, e)
			}
			if l.Ends.After(start.Add(60 * time.Second)) {
				renewedLater++
			}
			if n := len(h.Nomad.Allocs[k]); n != allocs[k] {
				t.Errorf("%s kept its lease but was restarted (%d allocations, had %d)", k, n, allocs[k])
			}
		default:
			revoked++
			j := h.Nomad.Jobs[k]
			if h.Store.JobRecords[k].Preemptions == 0 && j.Meta[nomad.SuspendedMeta] == "" && len(h.Nomad.Running(k.ID)) > 0 && h.Store.JobLeases[k].Revoke == nil {
				t.Errorf("%s lost lease %s but runs on unrevoked: %+v", k, id, h.Store.JobStatuses[k])
			}
		}
	}
	t.Logf("after the first leases ended: %d kept in place (%d with a new end), %d taken back", renewed, renewedLater, revoked)
	if renewedLater == 0 && revoked == 0 {
		t.Fatal("no lease was renewed or taken back at its end")
	}
	if renewed+revoked != len(first) {
		t.Fatal("lost track of a lease")
	}
}

// The job that waited the first lease out (mid) runs once the leases that
// lost the round are released.
func TestThemisLiveWaiterRunsAtLeaseEnd(t *testing.T) {
	h := newClusterHarness(t, 2, 8, themisStack(t, "60s"))
	submitSweepAndBig(h.Nomad)
	h.Nomad.SubmitApp("mid", 4, "mid")
	start := h.Clock
	for h.Clock.Before(start.Add(90 * time.Second)) {
		h.Round("rounds")
		h.Clock = h.Clock.Add(4 * time.Second)
	}
	mid := core.JobKey{Namespace: "default", ID: "mid"}
	if l, ok := h.Store.JobLeases[mid]; !ok || l.Revoke != nil || len(h.Nomad.Running("mid")) != 1 {
		t.Fatalf("mid does not run after the first leases ended: %+v", h.Store.JobStatuses[mid])
	}
}

// Each auction round's result per app is recorded for operators.
func TestThemisLiveRecordsTheAuction(t *testing.T) {
	h := newClusterHarness(t, 2, 8, themisStack(t, "60s"))
	var v View
	h.config.OnRound = func(nv View) { v = nv }
	h.Restart()
	h.Nomad.SubmitApp("a", 8, "a")
	h.Nomad.SubmitApp("b", 8, "b")
	h.Nomad.SubmitApp("c", 4, "c")
	h.Round("auction")
	// The published view (the API's /v1/apps) carries the same round.
	if v.Auction == nil {
		t.Fatal("the view has no auction round")
	}
	if b, _ := json.Marshal(*v.Auction); string(b) != string(h.Store.Auction) {
		t.Errorf("view's auction %s, recorded %s", b, h.Store.Auction)
	}
	var rep arbiter.RoundReport
	if err := json.Unmarshal(h.Store.Auction, &rep); err != nil {
		t.Fatalf("recorded auction %q: %v", h.Store.Auction, err)
	}
	won := 0
	for _, a := range rep.Apps {
		won += a.Won
		if a.Rho <= 0 {
			t.Errorf("app %s: rho %v", a.App, a.Rho)
		}
	}
	if len(rep.Apps) != 3 || won != 16 || rep.Offer != 16 {
		t.Fatalf("report %+v: want 3 apps winning the 16 GPUs offered", rep)
	}
}

// A planner killed after any number of writes in a Themis round (state
// record, grants, pins, lease renewals, revokes) is finished by the next
// one, which imports the recorded state: no GPU is leased twice, no task
// runs without its lease, and every app gets GPUs at the next lease end.
func TestThemisSurvivesACrashAtEveryWrite(t *testing.T) {
	for crashAfter := 0; crashAfter <= 12; crashAfter++ {
		t.Run("after "+itoa(crashAfter)+" writes", func(t *testing.T) {
			ctx := context.Background()
			build := func() *stack.Stack { return themisStack(t, "30s") }
			h := newClusterHarness(t, 2, 8, build())
			newPlanner := func(b *plannertest.Budget) *Planner {
				h.Nomad.Crash, h.Store.Crash = b, b
				cfg := h.config
				cfg.Stack = build()
				return New(cfg)
			}
			h.P = newPlanner(nil)
			submitSweepAndBig(h.Nomad)
			h.Round("first auction")
			h.Nomad.SubmitApp("late", 8, "late")
			h.Clock = h.Clock.Add(30 * time.Second) // the first leases end
			h.P = newPlanner(&plannertest.Budget{Left: crashAfter})
			if err := h.P.Reconcile(ctx); err != nil && !errors.Is(err, plannertest.ErrCrash) {
				t.Fatal(err)
			}
			plannertest.CheckNoTaskWithoutLease(t, h.Nomad, h.Store, "after the crash")
			h.Nomad.Settle()
			h.P = newPlanner(nil)
			for range 60 {
				h.Round("next planner")
				h.Clock = h.Clock.Add(time.Second)
			}
			held := map[string]core.JobKey{}
			for k, l := range h.Store.JobLeases {
				for _, g := range l.GPUs {
					if other, dup := held[g]; dup {
						t.Fatalf("GPU %s leased to %s and %s", g, other, k)
					}
					held[g] = k
				}
			}
			late := core.JobKey{Namespace: "default", ID: "late"}
			if _, ok := h.Store.JobLeases[late]; !ok && h.Store.JobRecords[late].Executed == 0 {
				t.Fatalf("late never ran after the crash: %+v", h.Store.JobStatuses[late])
			}
		})
	}
}
