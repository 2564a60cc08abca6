// Package gittins computes the Gittins index that Tiresias's 2D-Gittins
// policy uses to order jobs (Gu et al., NSDI'19, section 4.2, Pseudocode 1
// and "Discretized 2DAS"). For attained service a (GPU-seconds) and a
// quantum Δ, with job sizes S from an empirical distribution,
//
//	G(a, Δ) = P(S - a <= Δ | S > a) / E[min(S - a, Δ) | S > a]
//
// New builds a Distribution from samples; Index is G at a fixed Δ (what
// Tiresias runs; QuantumFor picks Δ for a queue), BestIndex the supremum
// over Δ; both are 0 for a job that outlived every sample. Online learns
// the distribution from finished jobs. Why a fixed Δ, the differences from
// the authors' simulator and the costs: docs/tiresias.md, "The Gittins index".
package gittins
