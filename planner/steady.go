package planner

import (
	"context"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/stack"
)

// Skipping the rounds where nothing changed (#35, docs/scale.md).
//
// A round that decided and whose every step succeeded leaves a steady
// state: the change marks of Nomad and Consul it read before reading
// anything else (Nomad's node, job and allocation table indexes; Consul's
// KV index), the stack it decided with, and until when its decision stands
// with only the clock moving: the policy's own word (core.Steady), and the
// planner's deadlines (a gang's place timeout, a resumed job's restore
// guard, a progress record stamped ahead of the clock). The next round
// reads the marks again (one request to Consul; Nomad's indexes as the
// adapter's blocking queries last saw them, planner/nomad/marks.go, or
// three one-row lists for a table not watched); when none moved, the stack
// is the same and that time has not come, it ends there: everything it
// would read is what the last round read, and deciding again on the same
// inputs before then decides the same, so the last round's writes (none
// failed) still stand. Any write moves a mark, so the round after a round
// that acted always runs. A policy that cannot say how long its decision
// stands (no core.Steady), an adapter that cannot mark (no ChangeMarker),
// a failed probe or Config.DecideEveryRound (SetDecideEveryRound): every
// round runs. A full
// round runs at least every FullRoundEvery all the same.

// ChangeMarker is implemented by a Cluster or Store that can say cheaply
// whether anything it holds changed: two equal marks mean nothing did in
// between (the real adapters: table and KV indexes, which every write
// raises; the in-memory fakes: a digest of their state).
type ChangeMarker interface {
	ChangeMark(ctx context.Context) (string, error)
}

// FullRoundEvery bounds how long rounds are skipped: a full round then
// runs even if nothing changed.
const FullRoundEvery = 5 * time.Minute

// steady is what the last round left for the next one to skip on.
type steady struct {
	marks marks
	stack *stack.Stack
	// until is when the decision may change with time alone (zero:
	// never); at when the round ran.
	until, at time.Time
}

// marks are Nomad's and Consul's change marks.
type marks struct{ nomad, kv string }

// readMarks reads the change marks, ok false when they cannot be read
// (an adapter without ChangeMarker, a failed probe: the round runs).
func (p *Planner) readMarks(ctx context.Context) (m marks, ok bool) {
	if p.everyRound.Load() {
		return marks{}, false
	}
	n, nok := p.cfg.Nomad.(ChangeMarker)
	s, sok := p.cfg.Store.(ChangeMarker)
	if !nok || !sok {
		return marks{}, false
	}
	// Both at once: each mark on its own says whether its store changed
	// since the last round read it (its index was the same before that
	// read and now), so the order of the probes does not matter.
	var kvErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.kv, kvErr = s.ChangeMark(ctx)
	}()
	var err error
	m.nomad, err = n.ChangeMark(ctx)
	<-done
	if err != nil || kvErr != nil {
		return marks{}, false
	}
	return m, true
}

// unchanged reports whether this round may end before reading: the last
// round left a steady state that still holds.
func (p *Planner) unchanged(m marks, st *stack.Stack, now time.Time) bool {
	s := p.steady
	return s != nil && s.marks == m && s.stack == st &&
		(s.until.IsZero() || now.Before(s.until)) && now.Sub(s.at) < FullRoundEvery && !now.Before(s.at)
}

// steadyUntil is until when the round's decision stands with only the
// clock moving, ok false when that cannot be said (the policy is not
// core.Steady, sc nil): the earliest of the policy's time over the jobs as
// the decision left them (after), the policy's recheck time, and the
// planner's deadlines.
func steadyUntil(sc core.Steady, r *round, after []*core.Job, recheck time.Time) (until time.Time, ok bool) {
	if sc == nil {
		return time.Time{}, false
	}
	earliest := func(t time.Time) {
		if !t.IsZero() && (until.IsZero() || t.Before(until)) {
			until = t
		}
	}
	earliest(sc.SteadyUntil(r.now, after))
	earliest(recheck)
	for _, j := range after {
		// A resumed job may be preempted once its restore guard ends.
		if j.Phase == core.Granted && j.RestoreLeft > 0 {
			earliest(r.now.Add(time.Duration(j.RestoreLeft * float64(time.Second))))
		}
	}
	for _, pr := range r.progress {
		// A record stamped ahead of the clock counts once it is no more
		// than progressSkew ahead (withProgress).
		if at := pr.At.Add(-progressSkew); at.After(r.now) {
			earliest(at)
		}
	}
	earliest(r.wake) // the round's own deadlines (a gang's place timeout)
	return until, true
}

// wakeAt notes a time at which the round's model changes with the clock
// alone (a deadline it checked): the decision stands no longer.
func (r *round) wakeAt(t time.Time) {
	if t.After(r.now) && (r.wake.IsZero() || t.Before(r.wake)) {
		r.wake = t
	}
}
