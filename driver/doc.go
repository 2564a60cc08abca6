// Package driver is the themis Nomad task driver (binary themis-driver,
// driver name "themis"): it runs a training process on the GPUs the
// planner leased to its job, and gives it what it needs to checkpoint and
// resume across preemptions.
//
// Driver (New) implements drivers.DriverPlugin. StartTask refuses a task
// whose GPUs are not leased to its job in Consul (invariant 1, lease.go)
// and starts it through Nomad's executor as a uid of its allocation's
// own, fenced to its own GPUs' device files; StopTask keeps the
// checkpoint protocol (protocol.go); RecoverTask re-attaches after a
// driver restart. Config, environment and isolation: docs/drivers.md,
// "The themis driver"; the protocol: docs/checkpoints.md.
package driver
