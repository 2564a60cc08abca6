// Package policies holds the concrete queue policies: each ranks jobs and
// states its capabilities (core.Policy, core.Capabilities); the generic
// scheduler in planner/core turns a ranking into grants and preemptions.
// planner/stack's registry is the one list of their names.
//
//	the papers' baselines: fifo, fifo-skip, srtf, srsf, las,
//	  gandiva, optimus                                       baselines.go
//	Tiresias's discretized 2D-LAS and 2D-Gittins             tiresias.go
//	FitGpp and its baselines lrtp and rand (make room)       fitgpp.go, fitgpp_gang.go
//	the Themis paper's app-level baselines                   apps.go
//	the ranking they share: near-linear bucketed sort        rank.go
//
// Themis's arbiter (a core.Allocator) is planner/arbiter; the
// simulator-only disciplines are planner/sim/peer and planner/sim/leased.
// The package imports core, never the reverse. Its tests decide through
// core.Scheduler, so they also cover the core's strategies with each real
// policy (the core's own tests use none).
package policies
