package core

import (
	"slices"
	"strings"
	"time"
)

// PerVC is the queue policy of a cluster of virtual clusters whose VCs may
// each run a policy of their own (a VC config's `policy`): the jobs of a VC
// with an entry in VCs are ranked, promoted, preempted and given room by
// that VC's policy; the others by Default. It runs only with a Placer
// (Scheduler.placed carries out each VC's preemptions inside the VC).
//
// Rank composes the rankings: the jobs of the VCs on Default first, ranked
// together by it (as when no VC has a policy of its own), then each VC with
// a policy of its own, in name order, ranked by that policy. The scheduler
// then places higher priorities first (guaranteed jobs before opportunistic
// ones), keeping this order inside a priority. A VC's guaranteed jobs only
// ever take that VC's cells, so the order between VCs decides only which
// VC's jobs first take idle GPUs as opportunistic jobs, and which
// opportunistic jobs are evicted first.
type PerVC struct {
	Default Policy
	// VCs are the policies of the VCs that have their own, one instance
	// each (policies may keep state: Tiresias's learned sizes).
	VCs map[string]Policy

	// def and own are Default's and VCs' capabilities, resolved once.
	def   Capabilities
	own   map[string]Capabilities
	order []string // VCs' names, sorted
}

// NewPerVC composes per-VC policies over def; with no VC policy it is def.
func NewPerVC(def Policy, vcs map[string]Policy) Policy {
	if len(vcs) == 0 {
		return def
	}
	p := &PerVC{Default: def, VCs: vcs, def: def.Capabilities(), own: make(map[string]Capabilities, len(vcs))}
	for name, q := range vcs {
		p.order = append(p.order, name)
		p.own[name] = q.Capabilities()
	}
	slices.Sort(p.order)
	return p
}

// Capabilities implements Policy: the composition promotes, rechecks and
// makes room when some VC's policy does (each VC's own through
// Capabilities.Of), and seeds every VC's policy that draws random numbers.
func (p *PerVC) Capabilities() Capabilities {
	c := Capabilities{Policy: p, Seeder: p, vcs: p}
	if c.Any(func(q Capabilities) bool { return q.Promoter != nil }) {
		c.Promoter = p
	}
	if c.Any(func(q Capabilities) bool { return q.Rechecker != nil }) {
		c.Rechecker = p
	}
	if c.Any(func(q Capabilities) bool { return q.RoomMaker != nil }) {
		c.RoomMaker = p
	}
	if !c.Any(func(q Capabilities) bool { return q.Steady == nil }) {
		c.Steady = p // only when every VC's policy says how long it stands
	}
	return c
}

// caps is the capabilities of virtual cluster vc's policy.
func (p *PerVC) caps(vc string) Capabilities {
	if c, ok := p.own[vc]; ok {
		return c
	}
	return p.def
}

// Of is the policy of virtual cluster vc.
func (p *PerVC) Of(vc string) Policy { return p.caps(vc).Policy }

// Name is the default policy's, with each VC's own, in a form that names a
// run's directory: "fifo+a=fitgpp+b=tiresias-las".
func (p *PerVC) Name() string {
	var b strings.Builder
	b.WriteString(p.Default.Name())
	for _, vc := range p.order {
		b.WriteString("+" + vc + "=" + p.VCs[vc].Name())
	}
	return b.String()
}

// groups splits jobs by the policy that ranks them: Default's first, then
// each VC's in name order. Jobs keep their relative order.
func (p *PerVC) groups(jobs []*Job) (def []*Job, own map[string][]*Job) {
	own = map[string][]*Job{}
	for _, j := range jobs {
		if _, ok := p.VCs[j.VC]; ok {
			own[j.VC] = append(own[j.VC], j)
		} else {
			def = append(def, j)
		}
	}
	return def, own
}

// Rank implements Policy (see PerVC for the composed order).
func (p *PerVC) Rank(now time.Time, jobs []*Job) {
	def, own := p.groups(jobs)
	p.Default.Rank(now, def)
	out := append(jobs[:0:0], def...)
	for _, vc := range p.order {
		g := own[vc]
		p.VCs[vc].Rank(now, g)
		out = append(out, g...)
	}
	copy(jobs, out)
}

// Preemptive reports whether any VC's policy preempts by rank (the
// simulator then decides at every event).
func (p *PerVC) Preemptive() bool {
	if p.Default.Preemptive() {
		return true
	}
	for _, q := range p.VCs {
		if q.Preemptive() {
			return true
		}
	}
	return false
}

// Blocking is the default policy's; the scheduler asks each VC's policy.
func (p *PerVC) Blocking() bool { return p.Default.Blocking() }

// Consolidate asks j's VC's policy.
func (p *PerVC) Consolidate(j *Job) bool { return p.Of(j.VC).Consolidate(j) }

// MakesRoom implements Preemptor: whether j's VC's policy makes room for
// it.
func (p *PerVC) MakesRoom(j *Job) bool {
	pre := p.caps(j.VC).RoomMaker
	return pre != nil && pre.MakesRoom(j)
}

// Victim implements Preemptor with j's VC's policy.
func (p *PerVC) Victim(j *Job, running []*Job, room *Room) *Job {
	if pre := p.caps(j.VC).RoomMaker; pre != nil {
		return pre.Victim(j, running, room)
	}
	return nil
}

// Promote implements Promoter: each VC's promoter over its own jobs.
func (p *PerVC) Promote(now time.Time, jobs []*Job) []JobKey {
	def, own := p.groups(jobs)
	var out []JobKey
	if pr := p.def.Promoter; pr != nil {
		out = append(out, pr.Promote(now, def)...)
	}
	for _, vc := range p.order {
		if pr := p.own[vc].Promoter; pr != nil {
			out = append(out, pr.Promote(now, own[vc])...)
		}
	}
	return out
}

// NextChange implements RecheckAfter: the earliest of the VCs' policies'.
func (p *PerVC) NextChange(now time.Time, jobs []*Job) time.Time {
	return p.soonest(jobs, func(q Capabilities, js []*Job) time.Time {
		if rc := q.Rechecker; rc != nil {
			return rc.NextChange(now, js)
		}
		return time.Time{}
	})
}

// SteadyUntil implements Steady: the earliest of the VCs' policies' (each
// over its own jobs). Capabilities names it only when every VC's policy is
// Steady; a VC whose policy is not makes it now, so nothing is skipped.
func (p *PerVC) SteadyUntil(now time.Time, jobs []*Job) time.Time {
	return p.soonest(jobs, func(q Capabilities, js []*Job) time.Time {
		if q.Steady == nil {
			return now
		}
		return q.Steady.SteadyUntil(now, js)
	})
}

// soonest is the earliest time (zero: none) that at gives for each VC's
// policy over that VC's jobs.
func (p *PerVC) soonest(jobs []*Job, at func(Capabilities, []*Job) time.Time) time.Time {
	def, own := p.groups(jobs)
	var next time.Time
	take := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	take(at(p.def, def))
	for _, vc := range p.order {
		take(at(p.own[vc], own[vc]))
	}
	return next
}

// Seed seeds every policy that draws random numbers (rand).
func (p *PerVC) Seed(seed int64) {
	p.Capabilities().each(func(q Capabilities) {
		if q.Seeder != nil {
			q.Seeder.Seed(seed)
		}
	})
}

// keepMostLost applies preempt.victims=least-lost-work to each VC's part of
// a ranking whose policy is a preemptive Leveler.
func (p *PerVC) keepMostLost(ranked []*Job) {
	for i := 0; i < len(ranked); {
		q := p.caps(ranked[i].VC)
		k := i + 1
		for k < len(ranked) && p.Of(ranked[k].VC) == q.Policy {
			k++
		}
		if q.Leveler != nil && q.Policy.Preemptive() {
			keepMostLost(ranked[i:k], q.Leveler.Level)
		}
		i = k
	}
}

var (
	_ Promoter     = (*PerVC)(nil)
	_ RecheckAfter = (*PerVC)(nil)
	_ Steady       = (*PerVC)(nil)
	_ Preemptor    = (*PerVC)(nil)
	_ Seeder       = (*PerVC)(nil)
)
