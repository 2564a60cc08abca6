// Package gittins computes the Gittins index that Tiresias's 2D-Gittins policy
// uses to order jobs (Gu et al., "Tiresias: A GPU Cluster Manager for
// Distributed Deep Learning", NSDI'19, section 4.2 "2D-Gittins index",
// Pseudocode 1, and "Discretized 2DAS").
//
// # The index
//
// A job's attained service a is its GPU-seconds so far (GPUs x time: the "2D"
// in 2D-Gittins). With job sizes S drawn from a distribution learned from
// finished jobs, the Gittins index for a service quantum Δ is
//
//	G(a, Δ) = P(S - a <= Δ | S > a) / E[min(S - a, Δ) | S > a]
//
// the chance that the job finishes within the next Δ of service, per unit of
// service it is expected to use in that quantum. Higher means higher priority.
// Pseudocode 1 takes the supremum over Δ > 0 (Distribution.BestIndex); the
// discretized policy Tiresias runs fixes Δ (Distribution.Index).
//
// The distribution here is empirical: a sorted list of sample sizes. For such
// a distribution, P is a step function of Δ that only rises at the support
// points s > a, and E grows with Δ between them, so G(a, ·) is maximal at
// Δ = s - a for one of the support points s above a (Δ beyond the largest
// sample adds nothing). BestIndex therefore maximizes over those points.
//
// # Which Δ Tiresias uses
//
// Continuous priorities preempt too often, so Tiresias discretizes: K queues
// with thresholds Q_1^hi < Q_2^hi < ..., and "the service quantum Δ in Gittins
// index is also discretized. For jobs in Q_i, Δ_i equals Q_i^hi ... In the last
// queue, Q_K, Δ_K is set to ∞." Within a queue jobs are sorted by
// Index(a, Δ_i); QuantumFor maps attained service and thresholds to Δ_i. The
// authors' simulator (SymbioticLab/Tiresias, run_sim.py, cal_r_gittins_index)
// uses one static Δ equal to the first threshold (3,250 GPU-s, K = 2), and
// sorts each queue by the index, highest first.
//
// The sup-over-Δ index is not what Tiresias runs, and for good reason on an
// empirical distribution: as a approaches a support point s from below, Δ =
// s - a shrinks to 0 while P stays at least (samples at s)/(samples above a),
// so BestIndex grows without bound just before every sample and drops right
// after it, so a job's priority would swing each time its service passes a
// sample. With a fixed Δ every sample beyond a + Δ adds Δ to the denominator,
// so the index only grows without bound when all remaining samples lie within
// Δ, that is, when the job is known to finish within the quantum.
//
// Two deliberate differences from the simulator: it evaluates the expectation
// with S rather than S - a (sum(data[idx:idx_delta])), and it tabulates the
// index at s - 1 for each sample s and looks it up by the next sample above a;
// this package evaluates the paper's formula exactly at a.
//
// # A job that outlived every sample
//
// When no sample exceeds a, S > a has probability 0 under the empirical
// distribution and the conditional is undefined. Index and BestIndex then
// return 0, the lowest possible priority, as the Tiresias simulator does
// (get_gittins_index returns 0 past the largest sample). The alternative, +Inf,
// would let a job longer than anything seen before hold its GPUs ahead of every
// job the distribution can say something about; 0 instead leaves it behind
// them, ordered by the caller's tie-break (Tiresias: FIFO), which is what the
// paper's last queue does for Δ = ∞. The same 0 is returned for Δ <= 0 and for
// NaN arguments, so the index is never NaN.
//
// # Cost
//
// New sorts the samples and builds cumulative counts and compensated
// (double-double) prefix sums of n·E[min(S, s)] over the distinct support
// points: O(n log n) time, O(k) memory for k distinct sizes. Index is two
// binary searches, O(log k). BestIndex is O(log k + m) for the m distinct
// support points above a (about 30 µs at a = 0 on the 6,672 distinct sizes of
// yarn-gput10000). The compensated sums keep both within a few ulps of the
// direct sum over samples even when Δ is tiny next to the sizes.
//
// BestIndex could be O(log k): with x(t) = n·E[min(S, t)] and y(t) = n·F(t),
// G(a, s - a) is the slope of the secant from (x(a), y(a)) to (x(s), y(s)), so
// the supremum is a tangent query against the upper hull of the points past
// a (suffix hulls with jump pointers). Not done while the scan is this cheap
// and Tiresias itself uses a fixed Δ.
//
// Online learns the distribution from finished jobs (Observe); it buffers
// observations and merges them into a new Distribution on the next query,
// O(n + p log p) for p buffered sizes, so a stream of observations between
// scheduling rounds costs one rebuild per round.
//
// Without any distribution Tiresias falls back to 2D-LAS (priority = -a); that
// choice belongs to the caller (Online.Len reports 0).
package gittins
