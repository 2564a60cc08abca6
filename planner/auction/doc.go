// Package auction is the economic core of Themis (Mahajan et al.,
// "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI'20): the
// finish-time fairness ρ by which apps value GPUs, the app agents'
// valuation tables (bids), and the partial allocation (PA) auction that
// the arbiter runs round by round, with its filter, offers and leftover
// grants. It is named for what it computes, an auction and the values bid
// in it ("themis" names the module, the binary and the policy); the
// arbiter that runs it as a planner policy is planner/arbiter. It is pure:
// no I/O, no goroutines, no clock (times are arguments, in seconds), and
// it is deterministic given its inputs (the leftover draw takes a seed).
//
// # Pipeline
//
//	App, Job              an ML app and its jobs (section 2.1)         app.go
//	Class, Sensitivity    placement classes, slowdowns (4.3.1)         placement.go
//	T_id, T_sh, ρ         finish times and fairness (3.2, 4.3)         rho.go
//	  phase times         exact side by side, or LPT list schedule     schedule.go
//	N_avg                 contention since the app arrived             contention.go
//	  | Bid / BidCache    the agent's valuation table (section 4.3)    agent.go, bidtable.go
//	  v
//	Valuation             ρ_old and ρ(k GPUs, class)
//	  | Round             filter the 1-f worst-ρ apps (section 3.3.2)  round.go, filter.go
//	  v
//	Auction               PA over counts and classes + placement       auction.go, offer.go
//	  | PartialAllocation exact DP, leave-one-out, c_i (Pseudocode 1)  pa.go
//	  v
//	Award                 concrete GPUs per job, lease c_i x L; leftovers
//
// OfferFromNodes and JobApp (core.go) build an Offer and single-job Apps
// from the planner's core.Node and core.Job.
//
// # Finish-time fairness (sections 3.2 and 4.3)
//
// ρ = T_sh / T_id. For one job (Equation 1), with G the allocation held
// until the job completes:
//
//	T_sh           = (T_current - T_start) + iter_left x iter_time(G)
//	iter_time(G)   = iter_time_serial x S(G) / min(|G|, job_demand_max)
//	T_id           = T_cluster x N_avg
//	T_cluster      = iter_total x iter_time_serial / min(R_C, job_demand_max)
//
// S(G) is the job's slowdown for the placement class of G (Sensitivity:
// 1 / 1.1 / 1.3 by default for one machine / one rack / several racks,
// per-model values configurable); a one-GPU job is never spread. N_avg is
// the app's average contention (Contention keeps the time-weighted average).
// A Job may also be a gang (it runs on at least Gang GPUs, all at once).
//
// For several jobs (Equation 2) the app finishes when its last job does.
// Each phase's T_sh(i) is the finish of its slowest job, T_sh is the
// elapsed time plus the sum over phases, and T_id = B / min(R_C,
// app_demand_max) x N_avg with B the app's budget. Within a phase the jobs
// run side by side when their gangs fit, with the GPUs shared to minimise
// the phase's makespan exactly; otherwise one after another, longest first
// (LPT), as in section 4.3.3's example. Successive halving (Halving) keeps
// the better half of the jobs each phase; later jobs are estimated by the
// median iteration time of the current ones (section 4.3.3). The package's
// tests reproduce Table 3 (ρ = 4, 2, 1.06, 0.53, 0.35 for 1, 2, 4, 8, 16
// GPUs; the paper prints rounded values).
//
// ρ_old, the value of winning nothing (row 0 of Table 2), is left open by
// the paper. Here (App.RhoWait) an app with queued jobs that wins nothing is
// assumed to wait one more lease and then run on the fewest GPUs it can use
// at the worst placement: ρ_old = ρ(min GPUs, cross-rack) + lease / T_id. It
// is finite (log 1/ρ is defined for every bidder), grows while the app
// waits (section 3.3.2's losing apps rise in later rounds), and is worse
// than any allocation the app can use. An app with nothing queued has
// ρ_old = ρ with what it holds; it does not bid. The "current ρ" that
// round-by-round filtering sorts on is another estimate, App.CurrentRho: ρ
// with the app's max-min fair share at the ideal placement (filter.go says
// why ρ_old does not serve).
//
// Running jobs are not resized: new GPUs go to queued jobs. Later phases
// of a multi-job app run on all its GPUs, held and new; GPUs of separate
// allocations (held and new, or two running gangs) are taken to span one
// rack.
//
// # Valuations (section 4.3)
//
// GPUs of one machine are interchangeable, so a bid is a table over (count,
// placement class) rather than over GPU subsets: ρ(k, c) for k = 1..the
// queued jobs' demand (at most R_C) and every class, +Inf where the app
// cannot run or would rather wait. The table does not depend on the offer;
// the arbiter reads the entries an offer can hold (k on one machine needs a
// machine with k free GPUs, in one rack a rack with k). BidCache answers an
// app whose state is exactly unchanged with the same table, as the proof of
// Theorem 3.3 has agents reuse their cached ρ(.). NewValuation accepts
// tables from outside agents.
//
// # The auction: exact partial allocation (section 3.3.1, Pseudocode 1)
//
// The proportional-fair allocation maximises prod_i 1/ρ_i(G_i), i.e. the
// sum of the gains log(ρ_i(0)/ρ_i(G_i)). For an offer, each count k is
// valued at the best class the offer can hold (the least constrained among
// equal values, leaving machines to those who need them), and a count that
// does not beat every smaller one is refused (free disposal: an app never
// takes GPUs it would leave idle). The maximisation is then a knapsack over
// GPU counts, solved exactly by dynamic programming in PartialAllocation:
// prefix tables F[i][c] (best gain of apps before i on at most c GPUs) and
// suffix tables B[i][c]. The optimum is F[n][R]; each leave-one-out optimum
// max_c F[i][c] + B[i+1][R-c] costs one sweep, so the n extra problems of
// line 7 cost about as much as the first. In all O(n x R x table size)
// time, far less in practice: a table stops where every allocation of its
// apps fits, and each step skips, by exact bounds, the runs of counts an
// option cannot improve (about 86% of the sums on 4,096 GPUs), with the
// same results bit for bit. On a shared 2-core VM, BenchmarkAuction256x64
// (64 bidders, 256 GPUs, placement included) measured a median of about
// 0.4 ms and BenchmarkAuction4096x200 (200 bidders, 4,096 GPUs, demands up
// to 256 GPUs) 35 to 45 ms, against the paper's 354 ms median with Gurobi
// (section 6.2.3). BenchmarkBid makes an agent's table in about 0.01 ms on
// average for those apps on 256 GPUs and 0.1 ms on 4,096; its
// slowest-app-ms, the median time of the slowest app's table (six jobs of
// up to 128 GPUs), is about 0.4 ms (the paper measured 29 ms median, 334 ms
// p95): Bid follows each phase's
// makespan as the count grows instead of recomputing it per entry. Then
//
//	c_i = prod_{j!=i} 1/ρ_j(G_pf) / prod_{j!=i} 1/ρ_j(G_pf^-i)
//	    = exp(OPT - gain_i(G_pf,i) - OPT_-i)   in (0, 1]
//
// (the ρ_j(0) cancel). c_i <= 1 because the others' part of G_pf is a
// feasible allocation without i; an app that wins nothing has c_i = 1.
//
// # Placement
//
// Which GPUs each app gets is a bin-packing problem: deciding whether
// apps that each want k_i GPUs on one machine fit the machines' free GPUs
// is NP-hard, so no polynomial algorithm is exact over concrete GPUs. The
// auction is exact over counts and classes with per-app capacities (k on
// one machine needs some machine with k free GPUs, k in a rack some rack
// with k): a relaxation of the concrete problem, whose optimum is never
// below the best concrete assignment. Placement repair then takes concrete
// GPUs, machine-local allocations first, larger first, each on the machine
// with the fewest free GPUs that holds it (best fit), then rack-local ones on
// the best-fitting rack, then the rest on the fullest racks and machines.
// When every winner gets its class, the repaired GPUs reach the relaxation's
// optimum, which is therefore the concrete optimum: the tests check this
// against enumeration of every GPU assignment on small offers, where it
// holds in about 95% of random auctions (always on one machine). Otherwise a
// winner that cannot get its class gets the best class left (Award.Placed,
// and ρ at that class); one whose GPUs are then worth less than winning
// nothing is dropped (AuctionResult.Dropped) and its GPUs stay in the pool.
// Inside an app's GPUs each job gets one whole gang, placed best fit on the
// app's machines; GPUs for jobs that the app runs after others are the
// award's Spare.
//
// # Hidden payments for indivisible GPUs: c_i as a fraction of the lease
//
// PA gives app i the fraction c_i of its proportional-fair allocation and
// keeps 1-c_i as a hidden payment. Here a winner holds its whole bundle for
// c_i of the round's lease (Award.Lease = c_i x lease); then its lease ends
// early and the GPUs return to the pool, where the next round (a
// resource-available event) auctions them or hands them out as leftovers.
// Why time rather than GPUs, and why deterministic rather than random:
//
//   - Time is divisible; GPUs are not. Holding all of G_pf,i for a fraction
//     c_i of the lease gives exactly c_i of its GPU-time at the placement the
//     app bid for: counting value as progress made, the app gets c_i x its
//     value of G_pf,i, the utility under which PA is strategy-proof (Cole,
//     Gkatzelis and Goel, EC'13, the paper's [5]). Shrinking the bundle to
//     about c_i x |G_pf,i| GPUs instead would break gangs, change the
//     placement class and hit ρ's non-linearities (gang minimum, demand
//     cap, slowdown jumps), so the app would not get c_i of the value and
//     the incentive argument would fail.
//   - The argument is then exact, per round. With U_i = c_i x
//     ρ_i(0)/ρ_i(G_i) = exp(sum_j gain_j(G) - OPT_-i): a misreport only
//     changes which allocation G the mechanism picks, never OPT_-i (the
//     others' best without i), and the truthful G maximises the true sum.
//     So misreporting never pays. In ρ terms the app ends with ρ_i / c_i.
//     TestTruthTelling checks this on hundreds of random auctions and tens
//     of thousands of misreports (Figure 18's strategy among them), and that
//     without the payment some of them would pay.
//   - Deterministic. Probabilistic rounding (keep the bundle for the whole
//     lease with probability c_i, else nothing) is truthful only in
//     expectation and exposes apps to all-or-nothing swings: an app with
//     c_i = 0.9 would lose everything one round in ten and be checkpointed
//     for it.
//   - Work-conserving. The paid GPU-time is not lost: the GPUs come back to
//     the pool at c_i x lease. GPUs the auction does not allocate at all go
//     to the apps that did not bid, at once (section 3.3.2, "leftover
//     allocation").
//
// The price is an extra checkpoint and restore for a winner with c_i < 1
// (section 6.2.3 measures 5-10 s, against a 10-minute lease). Pseudocode 1
// line 21 gives the paid resources to random non-participants; giving them
// the winner's bundle for the rest of the lease in the same round would
// follow it more literally, but needs future-dated grants from the
// simulator and the live planner, so the GPUs go back to the pool instead.
//
// # Rounds (section 3.3.2, Pseudocode 1 lines 13-21)
//
// Round takes the active apps, the free GPUs, R_C and the lease
// (DefaultLease: 10 minutes), the fairness knob f (DefaultFairness: 0.8),
// and a seed. The apps that can use some GPUs of the offer are sorted by
// current ρ (App.CurrentRho), worst first (ties by ID), and the ceil((1-f) x n) worst of
// them, at least one, bid: the paper filters the 1-f fraction of all active
// apps, which would let apps that cannot use the offer crowd out ones that
// can. The winners hold c_i x lease. The GPUs left then go to the other
// apps in a random order drawn from the seed, each in turn taking the
// allocation it values most among what is left (random serial dictatorship:
// random, and it keeps gangs whole), for the whole lease. Apps that bid do
// not get leftovers (they would otherwise gain by losing the auction).
//
// Incumbents first (our addition): before the draw, every app that did not
// bid keeps the gangs its expired jobs ran on (Job.Own) that the auction
// left whole, and then draws with a new bid in which those jobs run. The
// draw would otherwise hand a running job's GPUs to another app that is no
// worse off (neither is among the worst 1-f), which costs a checkpoint and
// a restore and buys no fairness. The auction is not changed by it: it
// takes any GPU of the offer, and an app that waits reaches it once its ρ
// is among the worst. Own does not enter bids, and it is the arbiter's
// record of where a job ran, not something an app reports.
package auction
