package core

import (
	"fmt"
	"slices"
)

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

// placed is the scheduler with a Placer (virtual clusters). Each VC's jobs
// are ranked by its policy (Scheduler.Policy, or a PerVC's policy of the VC),
// and the placer places them, higher priorities first (guaranteed jobs
// before opportunistic ones), each priority in rank order:
//
//  1. Run sets. A VC whose policy preempts by rank (Tiresias, LAS) keeps,
//     in rank order, the guaranteed jobs that fit its guaranteed GPUs
//     (Placer.Guaranteed), besides those still restoring from a
//     checkpoint; its running guaranteed jobs outside that set are
//     preempted (and released in the placer), its queued ones outside it
//     wait.
//  2. Placement. Queued jobs are placed in order; a VC's queue blocks at
//     its first job that does not fit when its policy blocks. A guaranteed
//     job whose VC's policy makes room for it (FitGpp's trial-and-error
//     jobs) passes a blocked head and, when it does not fit, has the
//     policy choose victims among its VC's running guaranteed jobs, one at
//     a time, until it fits (or, live, a set for a gang over several
//     nodes: FitGpp's VictimSet). The placer itself may evict jobs to place one
//     (HiveD: opportunistic jobs anywhere, lower priorities of the VC).
//  3. Overflow (Scheduler.Overflow): the jobs that did not start try the
//     placer's Overflow in order.
//
// Opportunistic jobs (priority < 0) are neither counted in a run set nor
// chosen as a policy's victims: only a guaranteed job's placement evicts
// them, whatever the policy of either VC.
func (p Scheduler) placed(d *Decision, ranked []*Job, grants []Grant, grantOf *grantIndex, free *FreeGPUs) {
	heads := map[string]*Job{}
	var preempts []Action
	preempted := map[JobKey]bool{}
	// evict is the placer's preemption: the victim's placement is gone
	// already.
	evict := func(v JobKey) {
		gi, held := grantOf.get(v)
		if !held || preempted[v] {
			return
		}
		preempted[v] = true
		preempts = append(preempts, PreemptAction{Grant: grants[gi]})
		free.give(grants[gi])
	}
	// preempt is a VC policy's preemption: the placer releases it too.
	preempt := func(v *Job) {
		gi, held := grantOf.get(v.Key)
		if !held || preempted[v.Key] {
			return
		}
		preempted[v.Key] = true
		g := grants[gi]
		preempts = append(preempts, PreemptAction{Grant: g})
		p.Placer.Release(v.Key)
		free.give(g)
		free.charge(g, v, -1)
	}
	// behind names the head that blocks j: operators see who they wait
	// for (`themis status`). A new head changes every queued job's reason
	// in its VC; the planner writes a round's changed records in one
	// Consul transaction (planner/status.go), so that costs an operation
	// a job, not a request (docs/invariants.md, the load runs).
	behind := func(j *Job) string {
		if h := heads[j.VC]; h != nil {
			return fmt.Sprintf("behind %s in virtual cluster %q's %s queue", h.Key, j.VC, p.policyOf(j).Name())
		}
		return fmt.Sprintf("virtual cluster %q's %s queue is blocked", j.VC, p.policyOf(j).Name())
	}
	// Higher priorities are placed first (HiveD: guaranteed jobs before
	// opportunistic ones, and inside a VC by priority), each in rank order:
	// a job placed first could otherwise be evicted, in the same round, for
	// a higher-priority job ranked after it, and be granted GPUs it never
	// gets to use.
	if !slices.IsSortedFunc(ranked, byPriority) {
		ranked = slices.Clone(ranked)
		slices.SortStableFunc(ranked, byPriority)
	}
	var outranked map[JobKey]bool
	if p.Policy.Preemptive() {
		outranked = p.runSets(ranked, preempt)
	}
	rooms := map[string]*Room{}
	vcs := p.Placer.WaitingVCs()
	anyRoom := p.anyMakesRoom()
	var blocked []*Job // jobs that did not start in their VC, for overflow
	for i, j := range ranked {
		if j.Phase != Queued {
			continue
		}
		if vcs > 0 && len(heads) >= vcs && !anyRoom {
			// Every queue is blocked: the rest only waits.
			if !p.ExplainWaits && !p.Overflow {
				break
			}
			for _, j := range ranked[i:] {
				if j.Phase == Queued {
					p.wait(d, j, func() string { return behind(j) })
					if p.Overflow {
						blocked = append(blocked, j)
					}
				}
			}
			break
		}
		if outranked[j.Key] {
			p.wait(d, j, func() string {
				return fmt.Sprintf("ranked below the running jobs of virtual cluster %q by %s", j.VC, p.policyOf(j).Name())
			})
			if p.Overflow {
				blocked = append(blocked, j)
			}
			continue
		}
		pre, room := p.roomMaker(j)
		if heads[j.VC] != nil && !room {
			p.wait(d, j, func() string { return behind(j) })
			if p.Overflow {
				blocked = append(blocked, j)
			}
			continue
		}
		if never, why := p.Placer.Never(j); never {
			p.wait(d, j, func() string { return why })
			continue
		}
		g, ok, why := p.Placer.Place(j, free, evict)
		if !ok && room {
			r := rooms[j.VC]
			if r == nil {
				r = p.vcRoom(j.VC, ranked, grants, grantOf, free)
				rooms[j.VC] = r
			}
			g, ok = r.makeWith(j, pre, preempt, func() (Grant, bool) {
				g, ok, _ := p.Placer.Place(j, free, evict)
				return g, ok
			})
		}
		if !ok {
			if p.policyOf(j).Blocking() && heads[j.VC] == nil {
				heads[j.VC] = j
			}
			p.wait(d, j, func() string { return why })
			if p.Overflow {
				blocked = append(blocked, j)
			}
			continue
		}
		d.Actions = append(d.Actions, GrantAction{Grant: g})
	}
	if len(blocked) > 0 {
		p.overflow(d, blocked, free)
	}
	preemptFirst(d, preempts)
}

// policyOf is the policy that ranks j's virtual cluster.
func (p Scheduler) policyOf(j *Job) Policy { return p.caps.Of(j.VC).Policy }

// roomMaker is the capabilities of the policy that makes room for
// guaranteed job j in its VC; room is false when none does.
func (p Scheduler) roomMaker(j *Job) (c Capabilities, room bool) {
	if j.Priority < 0 {
		return Capabilities{}, false
	}
	c = p.caps.Of(j.VC)
	return c, c.RoomMaker != nil && c.RoomMaker.MakesRoom(j)
}

// anyMakesRoom reports whether some VC's policy may make room for its jobs.
func (p Scheduler) anyMakesRoom() bool {
	return p.caps.Any(func(c Capabilities) bool { return c.RoomMaker != nil })
}

// vcRoom is what a VC's Preemptor sees: the VC's running guaranteed jobs.
func (p Scheduler) vcRoom(vc string, ranked []*Job, grants []Grant, grantOf *grantIndex, free *FreeGPUs) *Room {
	var running []*Job
	for _, j := range ranked {
		if j.Phase == Granted && j.VC == vc && j.Priority >= 0 {
			running = append(running, j)
		}
	}
	r := newRoom(running, grants, grantOf, free)
	r.victims, r.tie = p.Victims, p.VictimTie
	return r
}

// runSets is step 1 of placed: for each VC whose policy preempts by rank,
// the guaranteed jobs that fit its guaranteed GPUs in rank order run; the
// running ones outside are preempted, and the queued ones outside are
// returned (they wait).
func (p Scheduler) runSets(ranked []*Job, preempt func(*Job)) map[JobKey]bool {
	byVC := map[string][]*Job{}
	var order []string
	for _, j := range ranked {
		if j.Priority < 0 || !p.policyOf(j).Preemptive() {
			continue
		}
		if j.Phase == Queued {
			if never, _ := p.Placer.Never(j); never {
				continue
			}
		}
		if _, seen := byVC[j.VC]; !seen {
			order = append(order, j.VC)
		}
		byVC[j.VC] = append(byVC[j.VC], j)
	}
	outranked := map[JobKey]bool{}
	for _, vc := range order {
		jobs := byVC[vc]
		blocking := p.policyOf(jobs[0]).Blocking()
		budget := p.Placer.Guaranteed(vc)
		for _, j := range jobs {
			if j.Phase == Granted && j.RestoreLeft > 0 {
				budget -= j.GPUs // still restoring: keeps its GPUs
			}
		}
		full := false
		for _, j := range jobs {
			if j.Phase == Granted && j.RestoreLeft > 0 {
				continue
			}
			if !full && j.GPUs <= budget {
				budget -= j.GPUs
				continue
			}
			full = full || blocking
			if j.Phase == Granted {
				preempt(j)
			} else {
				outranked[j.Key] = true
			}
		}
	}
	return outranked
}

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

// byPriority orders jobs by priority, highest first.
func byPriority(a, b *Job) int { return b.Priority - a.Priority }
