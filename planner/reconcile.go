package planner

import "github.com/themis-nomad/themis/planner/core"

// reconcile turns the world as read into the round's plan. It writes
// nothing (no Consul, no Nomad, no log line): it keeps a model of the
// world after the steps so far (round), plans each step as if it succeeds,
// and asks the decision core what to do on the state that model gives.
// Its other inputs are the planner's configuration, the statuses it last
// wrote, and the stack, whose policy the decision tells (the decision
// core's own memory: Themis's leases, app arrivals, auction rounds). The
// steps come in the order the round used to write in:
//
//  1. observe: leases being taken back driven on (revoke.go), pending
//     grants that no longer stand withdrawn, stale leases released, jobs
//     recorded, adopted into the pending pool or pinned (observeJob);
//  2. the decision core decides on the state the model gives;
//  3. the policy's state is recorded (a failure stops the round there);
//  4. act: releases, promotions, preemptions, grants, pending grants
//     (act), then the pending grants whose GPUs are free carried out;
//     the jobs left waiting held, held versions tagged, holds undone
//     (holdWaiting);
//  5. renewed lease ends, the auction, the policy told the decision is
//     carried out, the statuses, and the records of jobs gone (forget).
func (p *Planner) reconcile(w *world) *plan {
	pl := &plan{}
	r := newRound(w)
	r.plan = pl
	pl.r = r
	state := p.observe(r)
	pl.state = state
	cp := p.stack().Scheduler()
	cp.ExplainWaits, cp.EqualParts = true, true
	placer, err := p.placer(r)
	if err != nil {
		pl.fatal = err
		return pl
	}
	if placer != nil {
		cp.Placer = placer
	}
	d := cp.Decide(state, r.now)
	pl.decision = d
	// The jobs as the decision leaves them, for the times the policy's
	// ranking and decision change by themselves.
	var after []*core.Job
	caps := p.stack().Caps
	if caps.Rechecker != nil || caps.Steady != nil {
		after = afterDecision(state.Jobs, d)
	}
	if rc := caps.Rechecker; rc != nil {
		pl.recheck = rc.NextChange(r.now, after)
	}
	r.add(step{Kind: stepSaveState}) // act on nothing the record does not know of
	p.act(r, d)
	p.holdWaiting(r)
	p.renewLeases(r)
	p.recordAuction(r)
	// The decision is carried out (Themis: a new leader has nothing of it
	// left to finish), or the policy learned from the jobs this round
	// released (tiresias-gittins' job sizes).
	r.add(step{Kind: stepCarriedOut, Learned: r.learned})
	for k, st := range r.status {
		if j := r.jobs[k]; j != nil && j.Foreign() {
			st.Driver = j.Driver
			r.status[k] = st
		}
	}
	pl.status = r.status
	r.add(step{Kind: stepStatuses})
	r.forget()
	// After every step was planned: they noted the deadlines they checked.
	pl.until, pl.steady = steadyUntil(caps.Steady, r, after, pl.recheck)
	return pl
}
