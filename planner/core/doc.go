// Package core is the planner's decision core: given the cluster's state and
// the current time it returns the actions to take. It does no I/O, reads no
// clock and is deterministic, so the live planner (Nomad + Consul adapters) and
// the trace-driven simulator run exactly the same code.
//
// The pipeline, one concept per file:
//
//	State (nodes, GPUs with topology paths, jobs, current grants)   model.go
//	   |
//	   v
//	releases: finished jobs give their GPUs back                     decide.go
//	   |
//	   v
//	free GPUs = healthy GPUs on schedulable nodes - granted GPUs      free.go
//	   |
//	   v
//	policy: which queued jobs, in which order (FIFO, ...)            fifo.go
//	   |
//	   v
//	placement: which node and which GPUs, topology-aware             placement.go
//	   |
//	   v
//	Decision: actions (Release, Grant) + why each waiting job waits
//
// With virtual clusters (Scheduler.Placer: HiveD's cells, GPU quotas) the
// placer places every job, and each VC's jobs are ranked, preempted and
// given room by its own policy (the Scheduler's, or a PerVC's policy of the
// VC): run sets and room inside each VC, then placement in priority order
// (placed.go, pervc.go).
//
// Actions are ordered: all releases come before any grant, so an actuator that
// applies them in order never grants a GPU that is still leased.
package core
