package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
)

// A stateful policy's memory (core.Stateful: Themis's lease ends, app
// arrivals, contention, auction rounds; the job sizes tiresias-gittins
// learned) lives in Consul under
// themis/policy/<name>: a planner imports it into its stack's policy before
// the stack's first decision (at start, after a restart or an election,
// and after SIGHUP builds a new stack) and records it after every decision
// that changed it, and after the round's releases taught it something, so
// that a new planner decides as the old one would have.

// importState loads the recorded state into the stack's policy once.
func (p *Planner) importState(ctx context.Context) error {
	st := p.stack()
	if p.stateOf == st {
		return nil
	}
	sp := st.Caps.State
	if sp == nil {
		p.stateOf = st
		return nil
	}
	b, err := p.cfg.Store.PolicyState(ctx, st.Policy.Name())
	if err != nil {
		return err
	}
	if b != nil {
		if err := sp.ImportState(b); err != nil {
			return fmt.Errorf("policy %s: recorded state: %w", st.Policy.Name(), err)
		}
	}
	p.stateOf, p.saved = st, b
	return nil
}

// saveState records the policy's state when the decision changed it.
func (p *Planner) saveState(ctx context.Context) error {
	sp := p.stack().Caps.State
	if sp == nil {
		return nil
	}
	b, err := sp.ExportState()
	if err != nil {
		return fmt.Errorf("policy %s: export state: %w", p.stack().Policy.Name(), err)
	}
	if b == nil || bytes.Equal(b, p.saved) {
		return nil // nothing to record, or nothing new
	}
	if err := p.cfg.Store.PutPolicyState(ctx, p.stack().Policy.Name(), b); err != nil {
		return err
	}
	p.saved = b
	return nil
}

// carriedOut tells a policy that records its last decision (Themis, for a
// planner killed mid-round) that the round
// carried it out, and reports whether that changed its state.
func (p *Planner) carriedOut() bool {
	c := p.stack().Caps.Resumer
	return c != nil && c.CarriedOut()
}

// renewLeases writes into each lease in force the end its policy now gives
// it (a Themis winner that keeps its GPUs: the lease is renewed in place),
// so the lease key shows it.
func (p *Planner) renewLeases(r *round) {
	le := p.stack().Caps.LeaseEnder
	if le == nil {
		return
	}
	for _, k := range sortedKeys(r.leases) {
		l := r.leases[k]
		if l.Revoke != nil {
			continue
		}
		e, ok := le.LeaseEnd(k)
		if !ok || e.Equal(l.Ends) {
			continue
		}
		l.Ends = e.UTC()
		r.add(step{Kind: stepRenew, Job: k, Lease: l})
		r.setLease(k, l)
	}
}

// recordAuction plans the recording of the last auction round's result
// per app when a new round ran (Themis), for operators.
func (p *Planner) recordAuction(r *round) {
	ar := p.stack().Caps.Reporter
	if ar == nil {
		return
	}
	rep, ok := ar.LastRound()
	if !ok || rep.Round == p.auctionRound {
		return
	}
	r.add(step{Kind: stepAuction, Auction: &rep})
}

// putAuction logs and records an auction round.
func (p *Planner) putAuction(ctx context.Context, rep *core.RoundReport) error {
	for _, a := range rep.Apps {
		p.log.Info("auction", "round", rep.Round, "app", a.App, "rho", a.Rho, "bid", a.Bid, "won", a.Won,
			"rho_after", a.RhoAfter, "placed", a.Placed, "c", a.C, "lease_s", a.Lease)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if err := p.cfg.Store.PutAuction(ctx, b); err != nil {
		return err
	}
	p.auctionRound = rep.Round
	return nil
}
