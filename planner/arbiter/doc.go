// Package arbiter is the Themis arbiter (Mahajan et al., NSDI'20, section
// 3.3) as the policy "themis" of the planner's decision core: a
// core.Allocator that runs one round of planner/auction's
// partial-allocation auction (auction.Round) on every decision, and a
// core.RecheckAfter that asks for a decision when the next lease expires.
// It holds what the paper's arbiter does and the auction does not: the
// apps as the agents see them (built from core jobs), leases, rounds, and
// our additions (the reservation, early revocation, keeping jobs in
// place). The name is the paper's: "themis" names the module, the binary
// and the policy, so the package says which part of Themis it is.
//
// # Allocate, step by step (allocate.go)
//
//	observe      apps, contention, leases and which are over   allocate.go
//	openOffer    free GPUs + those under expired leases         allocate.go
//	modelApps    each app as its agent models it (auction.App)  agents.go
//	             and what the filter ranks it by                filter.go
//	revokeEarly  end leases early for an app left behind        revoke.go
//	reserve      hold GPUs for the worst-off app's large gang   reservation.go
//	runRound     auction.Round: filter, PA auction, leftovers   allocate.go
//	grantAwards  awards to grants and leases                    awards.go
//	stay, repack keep jobs on their own GPUs, gangs whole       awards.go
//	endLeases    stop the expired jobs that lost or moved       leases.go
//
// After the live planner imports the state (a restart, a new leader), the
// first decision carries out what is left of the recorded last one
// instead (resume.go): a planner killed mid-round gets the same answer.
//
// The Policy, its knobs and its state between rounds are in policy.go and
// knobs.go; GPU-set helpers (placement class, node) in gpus.go.
//
// # Apps and jobs
//
// The jobs that share core.Job.App are one app (a job without one is an app
// of its own). Each core job is a gang of exactly its GPUs; its work is
// counted in gang-seconds (auction.JobApp's convention: iter_time_serial =
// GPUs, iter_left = Remaining, iter_total = Work, or Remaining +
// Attained/GPUs when the job's whole work is not known). A
// job with LaterPhases > 0 belongs to a successive-halving sweep: the app's
// later phases are modelled by auction.Halving, each later phase's jobs doing
// twice the work of the previous phase's on twice the GPUs (Workload 2), up
// to the last phase's demand. The policy sees only the jobs the simulator
// has submitted (the current phase), so an app's T_id is estimated from
// them and their later phases.
//
// The app's slowdowns are its jobs' model's: 1 on one machine, core.Job.Skew
// across machines of a rack, core.Job.CrossRack across racks (the
// simulator's model classes). themis.lie scales one app's reported
// cross-machine and cross-rack slowdowns (Figure 18's strategic lying); its
// jobs still run at their true speed. themis.lie_remaining scales one app's
// reported remaining time (and its total by as much): the simulator's
// counterpart of a live workload misreporting its progress.
//
// Elapsed is the time since the policy first saw a job of the app; N_avg is
// the time-weighted number of apps with visible jobs since then
// (auction.Contention), updated at every decision.
//
// # Rounds and leases
//
// Each decision is a round (section 3.3.2): the offer is the free GPUs plus
// those of running jobs whose lease has expired, whose jobs are then
// queued again in their app's bid, each with the GPUs it ran on
// (auction.Job.Own: an app that does not bid keeps them when the auction
// leaves them whole). Winners hold their GPUs for c_i of the lease (but at
// least MinLeaseFraction of it), leftover grants for the whole lease (see
// planner/auction's doc).
// A job whose lease expired and whose app wins a gang that is exactly its
// GPUs keeps running (its lease renewed, no checkpoint); one whose app wins
// a gang elsewhere moves (preempted and granted in the same decision); one
// whose app wins nothing is preempted. Expired leases go to auction even
// when no job is queued: the best-placed GPUs then change hands, which is
// how apps that all want the one big machine (Figure 18) take turns on it,
// and how an app on spread GPUs gets a machine freed by another. (Renewing
// them silently instead left the first winner on that machine for good.)
//
// # Reservation for the worst-off app
//
// A large gang (Workload 2's last phases ask for up to 128 GPUs) can fit
// no offer while other apps keep winning the GPUs that free up a few at a
// time, and then it never runs; and an offer that holds it only spread
// gives it to the app spread (ρ_old assumes the worst placement, so any
// GPUs beat waiting). So when the app with the worst current ρ has a
// queued gang larger than the whole offer, or one that the offer holds only
// worse placed than the empty cluster could (on one machine, else in one
// rack) and that, by the app's own bid, would finish sooner waiting for the
// target than running so placed now, the policy reserves for it a target:
// the machine (else the rack) that will hold the gang soonest, counting
// the GPUs free or under expired leases now and those of running jobs as
// their leases end or they finish (target, releases). (The bid decides the
// wait: a reservation made for placement that the app does not want would
// delay the worst-off app for other apps' sake.) On the target, free GPUs stay
// free and expired leases end (their jobs are preempted) instead of being
// auctioned; the rest of the offer goes to a round among the other apps
// (the reserved-for app's own expired leases there are renewed). A gang
// that needs several racks has the whole cluster as its target: no round
// runs and every expired lease ends. Once the offer holds the gang as well
// placed as the empty cluster could, at most one lease later, the round
// runs with f = 1: the reserved-for app bids alone (the auction's winner
// takes what it values most, c_i = 1) and the rest goes to the others as
// leftovers. This is our addition: the paper's round-by-round filtering
// raises a losing app's ρ but does not say how a gang larger than any
// offer gets its GPUs.
//
// # No app left behind by lease timing
//
// With themis.revoke=on (the default), a newcomer that would wait past
// ρ = 1 (themis.revoke_rho) for the next release has the best-off apps'
// leases ended early for its gang (revoke.go).
//
// Knobs: themis.f (fairness knob f, default 0.8), themis.lease (default
// 10m; a Go duration or seconds), themis.lie and themis.lie_remaining
// (APP:+X% or APP:-X%, comma-separated; default none), themis.filter_remaining
// (reported, truth or as-run, default reported: what round-by-round
// filtering ranks the apps by; filter.go), themis.filter_estimate
// (current, whole or fluid, default current: the current ρ estimate the
// filter and the reservation rank the apps by; estimate.go), themis.revoke
// (on or off, default on; New leaves it off), themis.revoke_rho (the ρ in
// (0, 1] a newcomer must not reach waiting, default 1) and
// themis.revoke_victim (1 or target: the ρ a revoked job's app must stay at
// or below, 1 or themis.revoke_rho; default 1).
package arbiter
