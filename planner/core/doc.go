// Package core is the planner's decision core: given the cluster's state and
// the current time it returns the actions to take. It does no I/O, reads no
// clock and is deterministic, so the live planner (Nomad + Consul adapters) and
// the trace-driven simulator run exactly the same code.
//
// Scheduler.Decide, one concept per file:
//
//	State (nodes, GPUs with topology paths, jobs, current grants)        model.go
//	   |  releases: grants of finished or unknown jobs                   decide.go
//	   |  the policy's capabilities, resolved once (Policy.Capabilities) capabilities.go
//	   |  promotions (a Promoter), then the policy's ranking             policy.go (planner/policies)
//	   |  free GPUs = healthy GPUs on schedulable nodes - granted GPUs   free.go
//	   v  one of four strategies, chosen by the capabilities:
//	      - an Allocator decides itself (Themis), checked                allocator.go
//	      - with a Placer (virtual clusters): per-VC run sets and room,  placer.go, pervc.go
//	        placement in priority order, overflow
//	      - preemptive: the ranked jobs that fit run, the rest preempted preemptive.go
//	      - non-preemptive: queue walk, head-of-line blocking, room made nonpreemptive.go, room.go
//	        by a RoomMaker (FitGpp)
//	   |  placement: which node and which GPUs, topology-aware           placement.go, parts.go
//	   v
//	Decision: actions (Release, Promote, Preempt, Grant) + why each waiting job waits
//
// Actions are ordered: all releases come before any grant, so an actuator that
// applies them in order never grants a GPU that is still leased.
//
// The core keeps the model (model.go, fifo.go, the free set: free.go), the
// interfaces a policy implements (policy.go, capabilities.go, room.go,
// allocator.go, stateful.go, victims.go), Decide with its four strategies
// (they are the decision itself and share its per-round indexes: grants.go)
// and topology placement (placement.go, parts.go, span.go, cells.go: methods
// of the free set, whose per-node counts and precomputed cells they read on
// the simulator's hot path). The concrete policies are in planner/policies,
// which imports core; their names are listed once, in planner/stack's
// registry; the simulator-only disciplines live in planner/sim/peer and
// planner/sim/leased.
package core
