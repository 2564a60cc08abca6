// Package report turns simulation runs (sim.Result) into metrics, tables and
// plots: the files behind `themis sim ... --out DIR`.
//
// # One run
//
//	sim.Result --Summarize--> Summary --> summary.json
//	           \-WriteRun---> summary.json, jobs.csv, report.md,
//	                          jct_cdf.svg, queue_cdf.svg, utilization.svg
//
// # Several policies on one trace and cluster
//
//	[]sim.Result --Compare--> Comparison --> comparison.json, comparison.md
//	             \-WriteComparison-------> the above, jct_cdf.svg and
//	                                       queue_cdf.svg (one line per
//	                                       policy), and DIR/<policy>/ via
//	                                       WriteRun for every run
//
// # Definitions
//
//   - JCT (job completion time) is End - Submit. JCT statistics (average,
//     median, p95, p99) are taken over finished jobs only; unfinished jobs
//     have no completion time and are counted in "jobs" but not "finished".
//   - Queueing delay is JobResult.Queue, the total time a job waited between
//     submission and completion. Its statistics are also over finished jobs
//     only, so that they describe the same jobs as the JCT statistics (an
//     unfinished job's delay is cut off by the end of the run).
//   - Percentiles use the nearest-rank method: the p-th percentile of n
//     sorted values x[1..n] is x[ceil(p/100 * n)] (x[1] for p = 0). The
//     median is the nearest-rank 50th percentile, i.e. the lower of the two
//     middle values when n is even. No interpolation, so every reported
//     percentile is a JCT some job actually had.
//   - Makespan is Result.Makespan as the simulator reports it.
//   - gpu_time_s is the busy GPU-seconds actually used: the integral of the
//     step function Result.Util (sample i holds from its T until the next
//     sample's T; the last one until the makespan) over [0, makespan].
//     Samples at or after the makespan add nothing. This counts GPU time
//     that was lost to preemption or slow placement, unlike
//     sum(GPUs x Duration).
//   - utilization is gpu_time_s / (total_gpus x makespan_s).
//   - preemptions is Result.Preemptions.
//
// # Undefined values
//
// A statistic that cannot be computed (the average JCT of a run in which no
// job finished, utilization with a zero makespan, a factor of improvement
// that would divide by zero) is NaN in Go and is written as JSON null, as an
// empty cell in jobs.csv and as "n/a" in Markdown. NaN or Inf never reaches
// a JSON file. Counts and sums over nothing are 0.
//
// # Determinism
//
// All output is a function of the input alone, except the simulator's own
// wall time (summary.json "wall_s" and one line of report.md). Floats are
// rounded to 3 decimals and printed in their shortest form; JSON objects are
// structs (fixed field order), never maps; jobs keep trace order and
// policies keep the order they were given in.
//
// # Comparison and job bins
//
// The factor of improvement of a policy's metric is
// reference metric / policy metric, so a factor above 1 means the policy
// does better than the reference (the reference itself scores 1). This is
// the reciprocal of the Tiresias paper's "Factor of Improvement = duration of
// an approach / duration of Tiresias-L", which normalizes by the system under
// study. A factor is null when either side is undefined or the policy's
// metric is 0 while the reference's is not; 0/0 is 1.
//
// Jobs are binned as in Tiresias (NSDI'19, Section 5.1, Table 3) by size and
// length: small means at most 8 GPUs (one 8-GPU machine) and short means a
// trace duration (JobResult.Duration, the execution time at full speed)
// under 4 hours. That gives Bin1 SS (small-short), Bin2 SL (small-long),
// Bin3 LS (large-short) and Bin4 LL (large-long). Binning by the trace's
// duration rather than the observed running time puts a job in the same bin
// under every policy. TiresiasTestbedBinning holds the paper's thresholds for
// its scaled-down testbed (4 GPUs, 800 s). Each bin cell is the average JCT
// (and queueing delay) of the bin's finished jobs and its factor against
// the reference.
package report
