package core

import (
	"sync"
	"time"
)

// Scheduler is the decision core for one policy. It holds no state between
// rounds: everything it needs is in the State it is given.
type Scheduler struct {
	Policy Policy
	// ExplainWaits fills Decision.Waits with a reason per waiting job (the
	// live planner shows them; the simulator does not need them).
	ExplainWaits bool
	// SingleNode keeps every gang on one node.
	SingleNode bool
	// EqualParts places every gang as the live planner can pin it: on one
	// node, or, when larger than any node, in equal parts on whole nodes
	// (parts.go).
	EqualParts bool
	// Placer, when set, places every job in place of the free set's own
	// placement: virtual clusters' cells (HiveD) or GPU quotas. A queue then
	// blocks per virtual cluster: one VC's blocked head holds up only its
	// own jobs, and a VC's policy (Policy, or a PerVC's policy of the VC)
	// preempts and makes room among that VC's guaranteed jobs (placed).
	// Policies that allocate GPUs themselves (Allocator) do not run with a
	// Placer.
	Placer Placer
	// Victims is how victims are chosen where the policy has a choice
	// (knob preempt.victims; victims.go), and VictimTie how near two
	// victims' scores tie under LeastLostWork (knob preempt.tie).
	Victims   VictimOrder
	VictimTie float64
	// Overflow lets a job that does not fit its virtual cluster run
	// elsewhere as the Placer's Overflow places it (HiveD's opportunistic
	// jobs, preempted when a guaranteed job needs their GPUs): after every
	// job was placed in its VC, the blocked ones try overflow in rank order.
	Overflow bool

	// caps is Policy's capabilities, resolved once a Decide.
	caps Capabilities
}

// Decide returns this round's actions, in the order they must be applied:
// releases for finished jobs, promotions, preemptions, then grants.
//
// Non-preemptive policies start queued jobs in rank order on the free GPUs.
// Preemptive policies first choose the jobs that should run: running jobs
// still restoring from a checkpoint, then in rank order every job whose GPUs
// fit in the cluster's remaining capacity; then running
// jobs outside that set are preempted and queued jobs inside it are placed.
// A preempted job's GPUs are granted in the same round; an actuator that
// cannot stop jobs at once (the live planner) applies the grant once they
// are released, and Consul's check-and-set keeps it from leasing a GPU twice.
func (p Scheduler) Decide(s State, now time.Time) Decision {
	var d Decision
	p.caps = p.Policy.Capabilities()
	claimed := make([]bool, len(s.Grants))
	gx := &grantIndex{grants: s.Grants, claimed: claimed}
	defer gx.free()
	// Grants are matched to jobs by key, through the index of the grants
	// (few) rather than the jobs (many, in a simulation); or, when the
	// caller says which job holds each grant, through that.
	jgBuf := jobGrantPool.Get().(*[]int32)
	defer jobGrantPool.Put(jgBuf)
	jg, direct := jobGrants(s, *jgBuf)
	*jgBuf = jg
	// The policy sees pointers into s.Jobs; a job whose phase must be
	// corrected (a granted job without a grant is queued; a queued job that
	// holds a grant is treated as running, so the adapters repair its pin)
	// or that is promoted is copied first, so the caller's State is never
	// modified and nothing is copied in the usual case.
	buf := activePool.Get().(*[]*Job)
	defer func() {
		clear(*buf) // keep no job alive from the pool
		activePool.Put(buf)
	}()
	var active []*Job
	var run runCount // the active jobs that run, counted on the way
	ok := false
	if direct {
		active, run, ok = gx.collectDirect(s, jg, (*buf)[:0])
	}
	if !ok {
		// By key (GrantJobs absent, or not matching a key).
		clear(claimed)
		gx.byKey()
		active, run = gx.collect(s, (*buf)[:0])
	}
	*buf = active
	for gi := range s.Grants {
		// A grant whose job is finished or unknown (deregistered) is released.
		if !claimed[gi] {
			g := s.Grants[gi]
			d.Actions = append(d.Actions, ReleaseAction{Grant: g})
			// Released: not there to preempt (a placer may still name the
			// job as a victim).
			if gx.m != nil { // matched by key
				delete(gx.m, g.Job)
			}
		}
	}
	if pr := p.caps.Promoter; pr != nil {
		if keys := pr.Promote(now, active); len(keys) > 0 {
			promoted := make(map[JobKey]bool, len(keys))
			for _, k := range keys {
				d.Actions = append(d.Actions, PromoteAction{Job: k})
				promoted[k] = true
			}
			for i, j := range active {
				if promoted[j.Key] {
					c := *j
					c.Executed, c.Waited = 0, 0
					active[i] = &c
				}
			}
		}
	}
	p.Policy.Rank(now, active)
	if p.Victims == LeastLostWork && p.Policy.Preemptive() {
		if p.caps.vcs != nil {
			p.caps.vcs.keepMostLost(active)
		} else if lv := p.caps.Leveler; lv != nil {
			keepMostLost(active, lv.Level)
		}
	}
	x := s.Index
	if x == nil {
		x = NewClusterIndex(s.Nodes)
	}
	free := freeOf(s, x, claimed)
	if p.SingleNode {
		free.SingleNode()
	}
	if p.EqualParts {
		free.EqualParts()
	}
	if free.cpu != nil {
		for _, j := range active {
			if j.Phase == Granted {
				free.charge(s.Grants[gx.of(j.Key)], j, 1)
			}
		}
	}
	if a := p.caps.Allocator; a != nil && p.Placer == nil {
		p.allocate(&d, a, now, active, s.Grants, gx, free)
	} else if p.Placer != nil {
		p.placed(&d, active, s.Grants, gx, free)
	} else if p.Policy.Preemptive() {
		p.preemptive(&d, active, run, s.Grants, gx, free)
	} else {
		p.nonPreemptive(&d, active, s.Grants, gx, free)
	}
	return d
}

// activePool recycles the per-round slice of active jobs: the simulator
// decides hundreds of thousands of times over thousands of jobs, and the
// slice's pointers would otherwise be most of its garbage.
var activePool = sync.Pool{New: func() any { return new([]*Job) }}

// preemptFirst puts a scheduler's preemptions before the grants it appended
// to d (Decide's order: preemptions, then grants).
func preemptFirst(d *Decision, preempts []Action) {
	if len(preempts) == 0 {
		return
	}
	grantsAt := len(d.Actions)
	for i := len(d.Actions) - 1; i >= 0; i-- {
		if _, ok := d.Actions[i].(GrantAction); !ok {
			break
		}
		grantsAt = i
	}
	d.Actions = append(d.Actions[:grantsAt], append(preempts, d.Actions[grantsAt:]...)...)
}

func (p Scheduler) wait(d *Decision, j *Job, reason func() string) {
	if p.ExplainWaits {
		d.Waits = append(d.Waits, Wait{Job: j.Key, Reason: reason()})
	}
}

func consolidation(c bool) string {
	if c {
		return " on as few nodes as possible"
	}
	return ""
}
