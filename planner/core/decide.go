package core

import (
	"fmt"
	"slices"
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

// Placer places jobs for a Scheduler (see Scheduler.Placer). It may keep state
// between rounds (HiveD's cell bindings): whoever applies the decision
// tells it of the jobs that finish or are preempted.
type Placer interface {
	// Place chooses GPUs for queued job j and takes them from free (with
	// FreeGPUs.Take); ok is false when j must wait, and why then says why.
	// A running job it must preempt first it passes to preempt, which
	// gives that job's GPUs back to free and preempts it in the decision.
	Place(j *Job, free *FreeGPUs, preempt func(JobKey)) (g Grant, ok bool, why string)
	// Never reports whether j can never be placed, however empty its
	// virtual cluster: such a job waits without blocking its queue.
	Never(j *Job) (never bool, why string)
	// WaitingVCs is the number of virtual clusters with queued jobs this
	// round (0: unknown): once that many queues are blocked, nothing more
	// can start.
	WaitingVCs() int
	// Overflow places a job that Place could not place in its virtual
	// cluster outside it, on GPUs nobody is guaranteed now, as a job the
	// Placer may later preempt for a guaranteed one (Scheduler.Overflow); it
	// preempts nothing. ok is false when the job must wait.
	Overflow(j *Job, free *FreeGPUs) (g Grant, ok bool, why string)
	// Guaranteed is the number of GPUs virtual cluster vc is guaranteed
	// (its cells, or its quota): the budget of a preemptive VC policy.
	Guaranteed(vc string) int
	// Release frees a running job's placement: the decision preempts it
	// (a VC policy's ranking, or room made for a job). Whoever applies
	// the decision may release it again; that does nothing.
	Release(job JobKey)
	// SetVictimCost gives the cost of preempting a running job (the work
	// it would lose) to a placer that chooses victims among several
	// (HiveD's opportunistic jobs, preempt.victims=least-lost-work); nil
	// restores its default order. Placers that choose none ignore it.
	SetVictimCost(cost func(JobKey) float64)
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

func (p Scheduler) nonPreemptive(d *Decision, ranked []*Job, grants []Grant, grantOf *grantIndex, free *FreeGPUs) {
	pre := p.caps.RoomMaker
	var room *Room // built when a job first needs room made
	var preempts []Action
	var head *Job
	for _, j := range ranked {
		if j.Phase != Queued {
			continue
		}
		switch {
		case !free.Holds(j.GPUs):
			p.wait(d, j, func() string { return free.neverHolds(j.GPUs) })
		case !free.everFits(j):
			p.wait(d, j, func() string {
				return fmt.Sprintf("needs %g CPU and %g memory on one node; no schedulable node has that much", j.CPU, j.Memory)
			})
		case head != nil && (pre == nil || !pre.MakesRoom(j)):
			// A job that may preempt for room (FitGpp's TE jobs) is not
			// held up by a blocked head.
			p.wait(d, j, func() string { return fmt.Sprintf("behind %s in the %s queue", head.Key, p.Policy.Name()) })
		default:
			if g, ok := free.PlaceJob(j, p.Policy.Consolidate(j)); ok {
				d.Actions = append(d.Actions, GrantAction{Grant: g})
				continue
			}
			if pre != nil && pre.MakesRoom(j) {
				if room == nil {
					room = newRoom(ranked, grants, grantOf, free)
					room.victims, room.tie = p.Victims, p.VictimTie
				}
				if g, ok := room.make(j, p.caps, p.Policy.Consolidate(j), &preempts); ok {
					d.Actions = append(d.Actions, GrantAction{Grant: g})
					continue
				}
			}
			if p.Policy.Blocking() {
				if head == nil {
					head = j
				}
				p.wait(d, j, func() string {
					return fmt.Sprintf("head of the %s queue: waiting for %d free GPUs%s (%d free)", p.Policy.Name(), j.GPUs, consolidation(p.Policy.Consolidate(j)), free.Total())
				})
				continue
			}
			p.wait(d, j, func() string {
				return fmt.Sprintf("waiting for %d free GPUs%s (%d free)", j.GPUs, consolidation(p.Policy.Consolidate(j)), free.Total())
			})
		}
	}
	if len(preempts) > 0 {
		p.retryRoom(d, ranked, room, &preempts, free)
	}
	preemptFirst(d, preempts)
}

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

func (p Scheduler) preemptive(d *Decision, ranked []*Job, counted runCount, grants []Grant, grantOf *grantIndex, free *FreeGPUs) {
	// The running jobs still restoring keep their GPUs (counted, with the
	// running jobs, as Decide found them).
	budget := free.Capacity() - counted.restoring
	granted := counted.granted
	// Choose, in rank order, the jobs that run. Once no GPU is left and
	// every running job has been seen, the rest of the ranking only waits:
	// on a long queue that is most of it.
	run := runPool.Get().(*[]bool)
	defer runPool.Put(run)
	*run = zeroed(*run, len(ranked))
	stop := len(ranked)
	for i, j := range ranked {
		if budget <= 0 && granted == 0 {
			stop = i
			break
		}
		if j.Phase == Granted {
			granted--
			if j.RestoreLeft > 0 {
				(*run)[i] = true
				continue
			}
		}
		if j.Phase == Queued && !free.Holds(j.GPUs) {
			continue // can never run here: it takes no one's GPUs
		}
		if j.GPUs <= budget {
			(*run)[i] = true
			budget -= j.GPUs
		} else if p.Policy.Blocking() {
			// Jobs behind the blocked one do not run; the running ones
			// among them are still found below.
			for k := i + 1; k < len(ranked); k++ {
				if ranked[k].Phase == Granted && ranked[k].RestoreLeft > 0 {
					(*run)[k] = true
				}
			}
			break
		}
	}
	for i, j := range ranked[:stop] {
		if j.Phase == Granted && !(*run)[i] {
			g := grants[grantOf.of(j.Key)]
			d.Actions = append(d.Actions, PreemptAction{Grant: g})
			free.give(g)
			free.charge(g, j, -1)
		}
	}
	for i, j := range ranked {
		if i == stop {
			// Past stop nothing runs, and nothing there was running.
			if !p.ExplainWaits {
				break
			}
		}
		if j.Phase != Queued {
			continue
		}
		if !free.Holds(j.GPUs) {
			p.wait(d, j, func() string { return free.neverHolds(j.GPUs) })
			continue
		}
		if i >= stop || !(*run)[i] {
			p.wait(d, j, func() string { return fmt.Sprintf("ranked below the running jobs by %s", p.Policy.Name()) })
			continue
		}
		if g, ok := free.PlaceJob(j, p.Policy.Consolidate(j)); ok {
			d.Actions = append(d.Actions, GrantAction{Grant: g})
			continue
		}
		p.wait(d, j, func() string {
			return fmt.Sprintf("waiting for %d free GPUs%s (%d free)", j.GPUs, consolidation(p.Policy.Consolidate(j)), free.Total())
		})
	}
}

var runPool = sync.Pool{New: func() any { return new([]bool) }}

// overflow is the second pass of placed with Scheduler.Overflow: once every
// job that fits its virtual cluster has been placed (so none of them can
// evict, this round, a job that overflows), the jobs that did not start try
// the Placer's Overflow in rank order, a VC's queue blocking at its first
// job that cannot overflow either (for blocking policies).
func (p Scheduler) overflow(d *Decision, blocked []*Job, free *FreeGPUs) {
	stop := map[string]bool{}
	started := map[JobKey]bool{}
	for _, j := range blocked {
		if stop[j.VC] || free.Total() == 0 {
			continue
		}
		if never, _ := p.Placer.Never(j); never {
			continue
		}
		g, ok, _ := p.Placer.Overflow(j, free)
		if !ok {
			if p.policyOf(j).Blocking() {
				stop[j.VC] = true
			}
			continue
		}
		d.Actions = append(d.Actions, GrantAction{Grant: g})
		started[j.Key] = true
	}
	if len(started) > 0 && len(d.Waits) > 0 {
		d.Waits = slices.DeleteFunc(d.Waits, func(w Wait) bool { return started[w.Job] })
	}
}

// retryRoom gives the jobs that may preempt for room and still wait
// another try once this round's preemptions changed what is free (a later
// job's victim may make room for an earlier one too), until nothing more
// starts.
func (p Scheduler) retryRoom(d *Decision, ranked []*Job, room *Room, preempts *[]Action, free *FreeGPUs) {
	pre := p.caps.RoomMaker
	granted := map[JobKey]bool{}
	for _, a := range d.Actions {
		if g, ok := a.(GrantAction); ok {
			granted[g.Grant.Job] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, j := range ranked {
			if j.Phase != Queued || granted[j.Key] || !pre.MakesRoom(j) || !free.Holds(j.GPUs) || !free.everFits(j) {
				continue
			}
			g, ok := free.PlaceJob(j, p.Policy.Consolidate(j))
			if !ok {
				g, ok = room.make(j, p.caps, p.Policy.Consolidate(j), preempts)
			}
			if ok {
				d.Actions = append(d.Actions, GrantAction{Grant: g})
				granted[j.Key] = true
				changed = true
			}
		}
	}
	if p.ExplainWaits {
		d.Waits = slices.DeleteFunc(d.Waits, func(w Wait) bool { return granted[w.Job] })
	}
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

// byPriority orders jobs by priority, highest first.
func byPriority(a, b *Job) int { return b.Priority - a.Priority }
