// Package workload generates synthetic, seeded workloads for the simulator.
//
// FitGpp generates the workload of the FitGpp paper's evaluation (Yabuuchi,
// Taniwaki and Omura, "Low-latency Job Scheduling with Preemption for the
// Development of Deep Learning", OpML'19; papers/fitgpp-opml19.txt): a mix
// of trial-and-error (TE) and best-effort (BE) jobs whose execution time,
// CPUs, memory and GPUs come from per-class truncated normal distributions,
// with a grace period each, submitted so that the cluster's load is 2.0
// under FIFO. Describe reports a trace's realised statistics.
//
// # Parameters and their sources
//
// Every job is TE with probability TEFraction, independently. Its five
// attributes are drawn independently (the paper fits "separate normal
// distributions", Appendix A), each from a normal N(mean, sd) truncated to
// [lo, hi]; mean and sd are the untruncated normal's, as the paper states
// them ("the means of the fitted normal distributions"), so realised means
// are higher where the lower bound cuts off much of the left tail.
//
//	what                  mean    sd      lo      hi      realised mean*  source
//	TE share              30%                                             §3, App. A: "30% of them being TE"
//	TE execution time     5 min   10 min  1 min   30 min  10.4 min        mean, hi: App. A; sd, lo: ours
//	BE execution time     30 min  60 min  1 min   24 h    61 min          mean, hi: App. A; sd, lo: ours
//	grace period (both)   3 min   3 min   0       20 min  3.9 min         mean, hi: App. A; sd: ours; lo: >= 0
//	TE GPUs               1       1       1       node    1.55            ours
//	BE GPUs               4       4       1       node    4.36            ours
//	TE CPUs               4       4       1       node    5.4             ours
//	BE CPUs               12      12      1       node    14.4            ours
//	TE memory (GB)        16      16      1       node    20.7            ours
//	BE memory (GB)        64      64      1       node    82              ours
//	cluster               84 nodes x (32 CPUs, 256 GB, 8 GPUs)             §3
//	jobs                  2^19                                            §3
//	load                  2.0 under FIFO                                  §3
//
// (*) over 2^19 jobs, seed 1. "node" is the node's capacity: 8 GPUs,
// 32 CPUs, 256 GB by default.
//
// The paper gives no standard deviations, lower truncation points or
// request distributions, and its Figure 2 (the trace's statistics) is not
// in the text we have. Our choices:
//
//   - Execution times: sd = 2 x mean. A normal fitted to positive,
//     heavy-tailed job durations has a standard deviation well above its
//     mean (the Philly trace in traces/philly.csv: 6.4 times); with the
//     lower bound the shape is half-normal-like, most jobs short.
//     We read the 30 min and 24 h caps as the cluster's limits per class,
//     not as hints about the spread. Lower bound 1 min: a shorter job is
//     not a training run, and the bound keeps the slowdown
//     1 + wait/execution time finite and meaningful.
//   - Requests (CPUs, memory, GPUs): sd = mean, whole numbers, at least
//     1 of each, at most a node's capacity (the paper's jobs are single
//     tasks on one node, §2.1). TE jobs are small experiments: mostly 1-2
//     GPUs; BE jobs spread over 1-8 GPUs. CPUs and memory per GPU stay below
//     the node's 4 CPUs and 32 GB per GPU on average, so the GPUs are the
//     dominant resource of the cluster, as in a GPU cluster, while CPUs
//     and memory still decide fits. A whole-number draw is round(x) with x
//     from the normal truncated to [lo−½, hi+½), so each count gets the
//     normal's mass around it; the upper bound is lowered to the node's
//     capacity, so no request exceeds a node (truncation, not clamping: no
//     pile-up at the cap).
//   - GPUs >= 1: the paper's cluster is a GPU cluster for DL training, and
//     trace.Job's contract (and the simulator's gang model) wants a
//     positive gang size. CPU-only jobs are not generated.
//   - Grace periods: sd = mean = 3 min, so the 20 min cap is a cap (5.7 sd
//     out) and the realised mean stays near the paper's 3 min; lower bound
//     0 (a grace period cannot be negative).
//
// # Load and arrivals
//
// Write D_jr for job j's request of resource r (CPUs, memory, GPUs), T_j for
// its execution time, and C_r for the cluster's capacity of r (nodes x the
// node's). The paper (§3) submits jobs "at such a rate that the cluster load
// would be kept at 2.0 if they were scheduled by FIFO", without a formula.
// We read the load at time t as the demand of the jobs in the system, on
// the most loaded resource, relative to capacity:
//
//	L(t) = max_r Σ_{j submitted, not finished at t} D_jr / C_r
//
// counting running and queued jobs alike, in a strict FIFO schedule (the
// paper's vanilla FIFO: jobs start in submission order, each on the first
// node it fits, and a head that fits nowhere blocks the queue). A load of
// 1.0 is a cluster exactly full with nothing waiting; 2.0 is a full cluster
// with about as much again waiting. A load can only be "kept" at 2.0 this
// way: with a fixed arrival rate that offers twice the cluster's capacity,
// the backlog, and so the load, would grow without bound for the whole
// trace. This reading also fits the paper's results: FitGpp cuts FIFO's
// 95th-percentile TE slowdown by 96.6%, so FIFO's is about 30 times
// FitGpp's (near 1 + grace period / execution time). A bounded backlog of
// about one cluster gives that; an unbounded one would give slowdowns that
// grow with the trace's length.
//
// ArrivalsFIFO (the default) implements exactly that: it runs the FIFO
// schedule while generating and submits the next job whenever L(t) < Load,
// so after every event Load <= L(t) < Load + one job's share (at most
// 1/nodes). Arrivals therefore coincide with FIFO completions, and the
// first jobs (about 2 clusters' worth) all arrive at time 0. It uses no
// randomness.
//
// ArrivalsPoisson is the open alternative: a Poisson process whose rate
// makes the offered load
//
//	ρ = max_r Σ_j D_jr·T_j / (C_r · S)
//
// equal to Load, where S is the arrival window (last submission time; the
// first is 0). S is computed from the generated jobs, and the arrival
// times are those of a Poisson process conditioned on arrivals at 0 and S
// (exponential gaps scaled to sum to S), so ρ is Load exactly. Under FIFO
// the cluster can serve ρ < 1 at most (about 0.81 here, because of
// head-of-line blocking and fragmentation), so ρ = 2.0 is heavily
// overloaded: the queue grows for the whole trace.
//
// Describe reports both: FIFOLoad (the time average of L(t) over the
// arrival window in a FIFO replay of the trace) and OfferedLoad (ρ), per
// resource and per class.
//
// # Determinism
//
// A config gives the same trace on every run. Each attribute draws from its
// own PCG stream seeded by Seed, one draw per job (by inverting the
// truncated normal's CDF), so changing one distribution or the TE share
// changes no other attribute's draws.
//
// # Knobs
//
// FitGppFromKnobs maps the simulator's "--set workload.*" settings onto a
// config: workload.jobs, workload.seed, workload.te_fraction,
// workload.load, workload.arrivals and the node shape (workload.nodes,
// workload.node_cpus, workload.node_memory_gb, workload.node_gpus).
package workload
