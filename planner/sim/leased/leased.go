// Package leased runs a preemptive ranking policy on leases (knob
// sim.realloc), as the Themis paper ran its baselines: a simulator
// baseline the live planner refuses (stack.Stack.Live), which reallocates
// at every event.
package leased

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// Knob is the simulator's reallocation mode (sim.realloc): "instant"
// (the default: a preemptive policy re-ranks and preempts at every event)
// or a lease length (a Go duration or seconds), under which a running job
// keeps its GPUs until its lease ends (see Policy).
const Knob = "sim.realloc"

// FromKnobs reads sim.realloc: 0 for instant reallocation, else the
// lease in seconds.
func FromKnobs(k core.Knobs) (float64, error) {
	if !k.Has(Knob) {
		return 0, nil
	}
	v := k.String(Knob, "")
	if v == "instant" || v == "" {
		return 0, nil
	}
	lease := math.NaN()
	if d, err := time.ParseDuration(v); err == nil {
		lease = d.Seconds()
	} else if s, err := strconv.ParseFloat(v, 64); err == nil {
		lease = s
	}
	if !(lease > 0) || math.IsInf(lease, 0) {
		return 0, fmt.Errorf("%s = %q: want instant or a positive lease (10m, or seconds)", Knob, v)
	}
	return lease, nil
}

// Policy runs a preemptive ranking policy as the Themis paper ran its
// baselines (section 3.1: Tiresias with leases; section 6: "on any resource
// availability ... we allocate the resource to apps that have the least
// GPU service"): GPUs are reallocated only when they free up or when a
// running job's lease ends, not at every event. A job's lease starts when it
// is granted and lasts Lease seconds; until then the job ranks ahead of
// every other (so the preemptive scheduler keeps it running), and the free
// GPUs go to the others in the inner policy's order. When the lease ends the
// job ranks as the inner policy says: it keeps running (a new lease from
// then) if it still ranks among the jobs that fit, else it is preempted and
// pays the same checkpoint and restore as in instant mode. NextChange asks
// for a decision at every lease end.
//
// Policy wraps only policies with no other capability than ranking (and
// RecheckAfter): see Wrap.
type Policy struct {
	core.Policy
	// Lease is the lease in seconds.
	Lease   float64
	leases  map[core.JobKey]time.Time
	recheck core.RecheckAfter
}

// Wrap returns p under sim.realloc's lease (seconds; 0: p itself),
// and whether it wrapped p.
// Non-preemptive policies never preempt, and a policy that allocates GPUs
// itself (themis) has its own leases: both are returned as they are. A
// policy with capabilities beyond ranking (promotion, learning, victim
// levels, making room) is refused rather than silently stripped of them.
func Wrap(p core.Policy, lease float64) (q core.Policy, leased bool, err error) {
	if lease <= 0 || !p.Preemptive() {
		return p, false, nil
	}
	c := p.Capabilities()
	if c.Allocator != nil {
		return p, false, nil
	}
	if c.Promoter != nil || c.Learner != nil || c.Leveler != nil || c.RoomMaker != nil {
		return nil, false, fmt.Errorf("%s: policy %q ranks with more than its order (promotion, levels or room); leases are not modelled for it", Knob, p.Name())
	}
	return &Policy{Policy: p, Lease: lease, leases: map[core.JobKey]time.Time{}, recheck: c.Rechecker}, true, nil
}

// Capabilities implements core.Policy: a leased policy only ranks, and asks for
// a decision at every lease end.
func (l *Policy) Capabilities() core.Capabilities { return core.Capabilities{Policy: l, Rechecker: l} }

// Unwrap is the policy under the leases.
func (l *Policy) Unwrap() core.Policy { return l.Policy }

// Rank ranks by the inner policy, then moves the running jobs whose lease
// has not ended to the front (in the inner order). A running job seen for the
// first time starts its lease now; one whose lease ended is renewed from now
// (if the decision preempts it, the next Rank sees it queued and forgets it).
func (l *Policy) Rank(now time.Time, jobs []*core.Job) {
	l.Policy.Rank(now, jobs)
	lease := time.Duration(l.Lease * float64(time.Second))
	seen := make(map[core.JobKey]bool, len(l.leases))
	held := make([]*core.Job, 0, len(l.leases))
	rest := make([]*core.Job, 0, len(jobs))
	for _, j := range jobs {
		if j.Phase != core.Granted {
			rest = append(rest, j)
			continue
		}
		seen[j.Key] = true
		e, ok := l.leases[j.Key]
		switch {
		case !ok:
			l.leases[j.Key] = now.Add(lease)
			held = append(held, j)
		case e.After(now.Add(time.Millisecond)):
			held = append(held, j)
		default:
			l.leases[j.Key] = now.Add(lease) // renewed if it keeps running
			rest = append(rest, j)
		}
	}
	for k := range l.leases {
		if !seen[k] {
			delete(l.leases, k)
		}
	}
	copy(jobs, held)
	copy(jobs[len(held):], rest)
}

// NextChange is the earliest lease end after now, or the inner policy's next
// change when sooner. The simulator calls it after applying a decision, so
// the jobs that decision granted start their leases here.
func (l *Policy) NextChange(now time.Time, jobs []*core.Job) time.Time {
	var next time.Time
	if l.recheck != nil {
		next = l.recheck.NextChange(now, jobs)
	}
	lease := time.Duration(l.Lease * float64(time.Second))
	for _, j := range jobs {
		if j.Phase != core.Granted {
			continue
		}
		e, ok := l.leases[j.Key]
		if !ok {
			// Granted by the decision just made: its lease starts now.
			e = now.Add(lease)
			l.leases[j.Key] = e
		}
		if e.After(now) && (next.IsZero() || e.Before(next)) {
			next = e
		}
	}
	return next
}
