// Package hived is HiveD's layer (Zhao et al., OSDI'20) for the decision
// core: a cluster's physical cell tree, virtual clusters (VCs) that own
// cells of given types, buddy allocation with lazy binding, and guaranteed
// (Priority >= 0) vs opportunistic (Priority < 0) jobs.
//
// ParseConfig reads a VC config and New builds a Cluster from core.Nodes
// and it; Allocate places a gang and names the jobs to preempt, Release
// frees it, Adopt replays a running job after a restart; Placer is the
// core's Placer over a Cluster. It is pure (no I/O, clock or goroutines)
// and not safe for concurrent use. Cell types, the config, binding, what
// sharing safety guarantees and what replay keeps: docs/hived.md, "The
// package in detail".
package hived
