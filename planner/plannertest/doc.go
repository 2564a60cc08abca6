// Package plannertest is a test harness for the live planner and for anyone
// writing a policy: in-memory Nomad and Consul (Nomad, Store) with the
// semantics the planner relies on (check-and-set registration and records,
// all-or-nothing grants, count-0 suspension that stops an allocation only
// when the test lets it, unreadable jobs and records set aside), crash
// budgets that kill a planner after n writes (Budget), the invariant checks
// (CheckNoTaskWithoutLease, CheckGPUsLeasedOnce), and a Harness that runs a
// planner round by round with the checks after every round. It imports no
// planner package above the adapters' types, so the planner's tests use it.
//
//	h := plannertest.NewHarness(t, 1, 8, func(h *plannertest.Harness[*planner.Planner]) *planner.Planner {
//		return planner.New(planner.Config{Nomad: h.Nomad, Store: h.Store, Stack: st, Now: func() time.Time { return h.Clock }})
//	})
//	h.Nomad.Submit("a", 4, "be", "10s")
//	h.Round("grant a")
package plannertest
