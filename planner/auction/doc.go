// Package auction is the economic core of Themis (Mahajan et al., NSDI'20):
// the finish-time fairness ρ by which apps value GPUs (rho.go), the app
// agents' valuation tables (Bid, BidCache), and the partial-allocation
// auction (Auction, PartialAllocation) with its filter and leftover grants,
// which Round runs for one round. The arbiter that runs it as the planner's
// policy "themis" is planner/arbiter; OfferFromNodes and JobApp (core.go)
// build its inputs from the core's nodes and jobs.
//
// It is pure: no I/O, no goroutines, no clock (times are arguments, in
// seconds), and deterministic given its inputs (the leftover draw takes a
// seed). The pipeline, the formulas, the exact auction, placement, hidden
// payments and rounds, with benchmark figures: docs/themis-results.md,
// "The auction in detail".
package auction
