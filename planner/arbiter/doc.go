// Package arbiter is the Themis arbiter (Mahajan et al., NSDI'20, section
// 3.3) as the policy "themis" of the planner's decision core: a
// core.Allocator that runs one round of planner/auction's auction
// (auction.Round) on every decision, and a core.RecheckAfter that asks for
// a decision when the next lease expires. It holds what the paper's
// arbiter does and the auction does not: apps built from core jobs,
// leases, rounds, and our additions (the reservation for the worst-off
// app, early lease end, keeping jobs in place).
//
// Policy (policy.go, knobs.go) is the entry point; Allocate (allocate.go)
// runs a round step by step. The steps, apps, leases, the reservation and
// every knob: docs/themis-results.md, "The arbiter in detail".
package arbiter
