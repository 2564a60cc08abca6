package core

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// KnobRealloc is the simulator's reallocation mode (sim.realloc): "instant"
// (the default: a preemptive policy re-ranks and preempts at every event)
// or a lease length (a Go duration or seconds), under which a running job
// keeps its GPUs until its lease ends (see Leased).
const KnobRealloc = "sim.realloc"

// ReallocFromKnobs reads sim.realloc: 0 for instant reallocation, else the
// lease in seconds.
func ReallocFromKnobs(k Knobs) (float64, error) {
	if !k.Has(KnobRealloc) {
		return 0, nil
	}
	v := k.String(KnobRealloc, "")
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
		return 0, fmt.Errorf("%s = %q: want instant or a positive lease (10m, or seconds)", KnobRealloc, v)
	}
	return lease, nil
}

// Leased runs a preemptive ranking policy as the Themis paper ran its
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
// Leased wraps only policies with no other capability than ranking (and
// RecheckAfter): see WithRealloc.
type Leased struct {
	Policy
	// Lease is the lease in seconds.
	Lease   float64
	leases  map[JobKey]time.Time
	recheck RecheckAfter
}

// WithRealloc returns p under sim.realloc's lease (seconds; 0: p itself),
// and whether it wrapped p.
// Non-preemptive policies never preempt, and a policy that allocates GPUs
// itself (themis) has its own leases: both are returned as they are. A
// policy with capabilities beyond ranking (promotion, learning, victim
// levels, making room) is refused rather than silently stripped of them.
func WithRealloc(p Policy, lease float64) (q Policy, leased bool, err error) {
	if lease <= 0 || !p.Preemptive() {
		return p, false, nil
	}
	c := p.Capabilities()
	if c.Allocator != nil {
		return p, false, nil
	}
	if c.Promoter != nil || c.Learner != nil || c.Leveler != nil || c.RoomMaker != nil {
		return nil, false, fmt.Errorf("%s: policy %q ranks with more than its order (promotion, levels or room); leases are not modelled for it", KnobRealloc, p.Name())
	}
	return &Leased{Policy: p, Lease: lease, leases: map[JobKey]time.Time{}, recheck: c.Rechecker}, true, nil
}

// Capabilities implements Policy: a leased policy only ranks, and asks for
// a decision at every lease end.
func (l *Leased) Capabilities() Capabilities { return Capabilities{Policy: l, Rechecker: l} }

// Unwrap is the policy under the leases.
func (l *Leased) Unwrap() Policy { return l.Policy }

// Rank ranks by the inner policy, then moves the running jobs whose lease
// has not ended to the front (in the inner order). A running job seen for the
// first time starts its lease now; one whose lease ended is renewed from now
// (if the decision preempts it, the next Rank sees it queued and forgets it).
func (l *Leased) Rank(now time.Time, jobs []*Job) {
	l.Policy.Rank(now, jobs)
	lease := time.Duration(l.Lease * float64(time.Second))
	seen := make(map[JobKey]bool, len(l.leases))
	held := make([]*Job, 0, len(l.leases))
	rest := make([]*Job, 0, len(jobs))
	for _, j := range jobs {
		if j.Phase != Granted {
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
func (l *Leased) NextChange(now time.Time, jobs []*Job) time.Time {
	var next time.Time
	if l.recheck != nil {
		next = l.recheck.NextChange(now, jobs)
	}
	lease := time.Duration(l.Lease * float64(time.Second))
	for _, j := range jobs {
		if j.Phase != Granted {
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
