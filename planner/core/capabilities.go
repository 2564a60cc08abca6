package core

// Capabilities is a policy resolved into what it does beyond ranking, once:
// each field is the policy seen through one capability, nil when it has
// none. The scheduler (Decide), the simulator and the live planner read
// these fields rather than discover capabilities by type assertion.
//
// A policy states its own (Policy.Capabilities), so it cannot claim a
// capability it lacks the methods of: the assignment to the field's
// interface type is checked by the compiler. A policy that embeds another
// must state its own too, or it would report the embedded policy's
// (TestCapabilitiesAreTheirPolicys checks that every registered policy's
// Capabilities name the policy itself and every capability it has).
type Capabilities struct {
	// Policy ranks the jobs and sets the scheduler's switches; never nil.
	Policy Policy
	// Promoter promotes starving jobs (Tiresias).
	Promoter Promoter
	// Rechecker names the times its ranking changes by itself (Tiresias's
	// queue thresholds, leases' ends); the simulator decides again then.
	Rechecker RecheckAfter
	// Steady says how long a decision stands with only the clock moving
	// (FIFO: for ever; LAS: until a running job's service passes a
	// waiting one's); the live planner skips unchanged rounds till then.
	Steady Steady
	// RoomMaker preempts chosen running jobs to make room for a waiting one
	// (FitGpp and its baselines); GangRoom, when it may name a set of
	// victims at once.
	RoomMaker Preemptor
	GangRoom  GangPreemptor
	// Allocator chooses GPUs itself rather than rank for the generic
	// scheduler (Themis's arbiter).
	Allocator Allocator
	// Learner learns job sizes from finished jobs (2D-Gittins).
	Learner Learner
	// Leveler ranks by levels (Tiresias's queues), which
	// preempt.victims=least-lost-work reorders inside.
	Leveler Leveler
	// State is memory the live planner records in Consul and restores
	// after a restart (Themis, learned job sizes).
	State Stateful
	// LeaseEnder says when a running job's lease ends (Themis).
	LeaseEnder LeaseEnder
	// Resumer is told that the live planner carried out the last decision
	// (Themis: planner/arbiter/resume.go).
	Resumer Resumer
	// Reporter reports each round for operators (Themis's auction).
	Reporter Reporter
	// Seeder draws random numbers from a seed (rand, Themis).
	Seeder Seeder
	// Failer remembers an error a decision met, for the simulator to
	// report after its run (Themis).
	Failer Failer

	// vcs is set for a composition of per-VC policies (NewPerVC): the
	// capabilities of each VC's policy.
	vcs *PerVC
}

// Of is the capabilities of the policy that ranks virtual cluster vc's
// jobs: c itself unless c composes per-VC policies.
func (c Capabilities) Of(vc string) Capabilities {
	if c.vcs == nil {
		return c
	}
	return c.vcs.caps(vc)
}

// each calls f with every policy c composes (c itself unless per-VC).
func (c Capabilities) each(f func(Capabilities)) {
	if c.vcs == nil {
		f(c)
		return
	}
	f(c.vcs.def)
	for _, vc := range c.vcs.order {
		f(c.vcs.own[vc])
	}
}

// Any reports whether c, or any policy c composes, satisfies has.
func (c Capabilities) Any(has func(Capabilities) bool) bool {
	found := false
	c.each(func(q Capabilities) { found = found || has(q) })
	return found
}

// Observe tells the policy that ranks virtual cluster vc's jobs that one of
// them finished after gpuSeconds of service, if that policy learns job
// sizes.
func (c Capabilities) Observe(vc string, gpuSeconds float64) {
	if l := c.Of(vc).Learner; l != nil {
		l.Observe(gpuSeconds)
	}
}

// Learner is implemented by policies that learn from finished jobs; the
// simulator and the live planner report each finished job's GPU-seconds.
type Learner interface {
	Observe(gpuSeconds float64)
}

// Resumer is a policy that records its last decision until told that it
// was carried out (Themis, for a planner killed mid-round).
type Resumer interface {
	// CarriedOut reports whether the recorded decision changed the
	// policy's state, and forgets it.
	CarriedOut() bool
}

// Reporter is a policy that reports its last round for operators.
type Reporter interface {
	// LastRound is the last round that ran, ok false before the first.
	LastRound() (RoundReport, bool)
}

// Seeder is a policy that draws random numbers.
type Seeder interface{ Seed(seed int64) }

// Failer is a policy that remembers the last error a decision met.
type Failer interface{ Err() error }

// RankOnly is the capabilities of a policy that only ranks (and may say
// how long its ranking stands: Steady).
func RankOnly(p Policy) Capabilities {
	c := Capabilities{Policy: p}
	if s, ok := p.(Steady); ok {
		c.Steady = s
	}
	return c
}
