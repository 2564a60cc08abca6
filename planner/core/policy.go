package core

import (
	"time"
)

// Policy is a queue policy (per virtual cluster in the design): it ranks the
// active jobs and says how the ranking is enforced. The generic scheduler
// (Decide and its strategies: decide.go, preemptive.go, nonpreemptive.go)
// turns a ranking into grants and preemptions, so every policy shares the
// same gang, placement and accounting rules. The concrete policies are in
// planner/policies.
type Policy interface {
	Name() string
	// Rank orders the active jobs (queued and running), most deserving
	// first. It may only reorder the slice.
	Rank(now time.Time, jobs []*Job)
	// Preemptive policies stop running jobs that rank below queued jobs
	// the cluster has no room for otherwise.
	Preemptive() bool
	// Blocking policies start nothing behind a job that does not fit
	// (head-of-line blocking, as YARN's capacity scheduler).
	Blocking() bool
	// Consolidate says whether a job must be packed on as few nodes as
	// possible (one node when it fits on one), waiting if need be, rather
	// than placed on any free GPUs.
	Consolidate(j *Job) bool
	// Capabilities is what the policy does beyond ranking
	// (capabilities.go): the stack, the simulator and Decide resolve it
	// once and use its fields.
	Capabilities() Capabilities
}

// Promoter is implemented by policies that promote starving jobs.
type Promoter interface {
	// Promote lists the queued jobs whose service counters are reset.
	Promote(now time.Time, jobs []*Job) []JobKey
}

// Steady is implemented by policies that can say how long their decision
// stands while only the clock moves: no job, node, allocation or record
// changes, and the jobs' service and waits grow with time alone. The live
// planner skips the rounds whose inputs did not change before that time
// (planner/steady.go, docs/scale.md); a policy without it is decided every
// round. Unlike RecheckAfter, the simulator does not ask it, so stating it
// changes no simulated result.
type Steady interface {
	// SteadyUntil is the earliest time after now at which Decide on these
	// jobs (the phases the decision left them in), advanced by the clock
	// alone, may decide differently; zero means never. Earlier than the
	// true time is safe (a round that decides the same); later is not.
	SteadyUntil(now time.Time, jobs []*Job) time.Time
}

// RecheckAfter is implemented by policies whose ranking changes with time
// while nothing else happens (a running job crossing a queue threshold);
// the simulator asks it when to decide again.
type RecheckAfter interface {
	// NextChange is the earliest time after now at which the ranking of
	// jobs may change if they keep running as they are; zero means never.
	NextChange(now time.Time, jobs []*Job) time.Time
}
