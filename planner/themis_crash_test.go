package planner

import (
	"context"
	"errors"
	"fmt"
	"github.com/themis-nomad/themis/planner/plannertest"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/core"
)

// A planner killed mid-round (issue #15): the next leader gives the round
// the same answer and leases nothing twice. Two identical clusters (two
// 8-GPU nodes, a 20 s lease, apps s and b of two 4-GPU jobs and a of one
// 8-GPU job: at the first lease end the auction stops b's jobs and grants
// a their node) run the same rounds up to that lease end; there one
// planner restarts and decides, the other restarts, is killed after n
// writes of the round, and a new one decides at the same instant. After
// it, the two hold the same leases (GPUs, ends, revokes) and pending
// grants, and their recorded auctions agree; in every round no task runs
// without its lease and no GPU is leased twice.
func TestThemisKilledMidRoundSameAnswer(t *testing.T) {
	const writes = 10 // the lease-end round's writes, and one more
	for crashAfter := 0; crashAfter <= writes; crashAfter++ {
		t.Run(fmt.Sprintf("after %d writes", crashAfter), func(t *testing.T) {
			ctx := context.Background()
			twins := [2]*harness{}
			for i := range twins {
				h := newClusterHarness(t, 2, 8, themisStack(t, "20s"))
				for _, j := range lieApps {
					h.Nomad.SubmitApp(j.id, j.gpus, j.app)
				}
				for range 20 {
					h.Round("before the lease end")
				}
				twins[i] = h
			}
			whole, killed := twins[0], twins[1]
			fresh := func(h *harness, b *plannertest.Budget) {
				h.Nomad.Crash, h.Store.Crash = b, b
				cfg := h.config
				cfg.Stack = themisStack(t, "20s")
				h.P = New(cfg)
			}
			fresh(whole, nil)
			if err := whole.P.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			fresh(killed, &plannertest.Budget{Left: crashAfter})
			if err := killed.P.Reconcile(ctx); err != nil && !errors.Is(err, plannertest.ErrCrash) {
				t.Fatal(err)
			}
			plannertest.CheckNoTaskWithoutLease(t, killed.Nomad, killed.Store, "killed")
			fresh(killed, nil)
			if err := killed.P.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			for _, h := range twins {
				plannertest.CheckNoTaskWithoutLease(t, h.Nomad, h.Store, "after the lease end")
				checkGPUsLeasedOnce(t, h)
			}
			if a, b := answer(whole), answer(killed); a != b {
				t.Fatalf("the next leader's answer differs from the uninterrupted round's\nuninterrupted:\n%s\nkilled after %d writes, then the next leader:\n%s", a, crashAfter, b)
			}
			// The uninterrupted round: a takes b's node, b's jobs stop.
			if _, ok := whole.Store.PendingGrants[core.JobKey{Namespace: "default", ID: "a-0"}]; !ok {
				t.Fatalf("the round did not grant a: %s", answer(whole))
			}
		})
	}
}

// answer is what a round decided, as the store holds it: leases (GPUs,
// end, being revoked), pending grants and the last auction's round and
// winners.
func answer(h *harness) string {
	var b strings.Builder
	for _, k := range slices.SortedFunc(maps.Keys(h.Store.JobLeases), compareKeys) {
		l := h.Store.JobLeases[k]
		fmt.Fprintf(&b, "lease %s %v ends=%s revoking=%v\n", k, l.GPUs, l.Ends.Format(time.TimeOnly), l.Revoke != nil)
	}
	for _, k := range slices.SortedFunc(maps.Keys(h.Store.PendingGrants), compareKeys) {
		pg := h.Store.PendingGrants[k]
		fmt.Fprintf(&b, "pending %s %v ends=%s\n", k, pg.GPUs, pg.Ends.Format(time.TimeOnly))
	}
	if rep, ok := h.P.stack().Policy.(*arbiter.Policy).LastRound(); ok {
		fmt.Fprintf(&b, "auction round %d:", rep.Round)
		for _, a := range rep.Apps {
			fmt.Fprintf(&b, " %s won %d", a.App, a.Won)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// checkGPUsLeasedOnce fails when two leases hold one GPU.
func checkGPUsLeasedOnce(t *testing.T, h *harness) {
	t.Helper()
	plannertest.CheckGPUsLeasedOnce(t, h.Store)
}
