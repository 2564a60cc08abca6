package arbiter

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// The arbiter's state between rounds, as the live planner records it
// (core.Stateful): a planner that restarts, or a standby that takes over,
// imports it and runs the same auctions the old one would have.

var (
	_ core.Stateful   = (*Policy)(nil)
	_ core.LeaseEnder = (*Policy)(nil)
)

// state is the recorded form of the Policy's memory.
type state struct {
	// Leases are the running jobs' lease ends, by "namespace/job".
	Leases    map[string]time.Time    `json:"leases"`
	First     map[string]float64      `json:"first_seen"`
	Marks     map[string]auction.Mark `json:"marks"`
	Cont      auction.ContentionState `json:"contention"`
	Seed      uint64                  `json:"seed"`
	Reserving string                  `json:"reserving,omitempty"`
	Target    []string                `json:"target,omitempty"`
	Rounds    uint64                  `json:"rounds"`
	Ran       []string                `json:"ran"`
	// Last is the last round's result (report.go), so that a new leader
	// shows it (themis status -apps, /v1/apps) before its own first round.
	Last *RoundReport `json:"last,omitempty"`
	// Decided is the last decision (resume.go), which a planner that
	// imports the state carries out where it was interrupted.
	Decided *decided `json:"decided,omitempty"`
}

// ExportState implements core.Stateful.
func (p *Policy) ExportState() ([]byte, error) {
	s := state{Leases: map[string]time.Time{}, First: p.first, Marks: p.marks, Cont: p.cont.State(), Seed: p.seed,
		Reserving: p.reserving, Rounds: p.rounds, Ran: slices.Sorted(maps.Keys(p.ran)), Last: p.last, Decided: p.exportDecided()}
	for k, e := range p.leases {
		s.Leases[k.String()] = e.UTC()
	}
	if p.target != nil {
		s.Target = slices.Sorted(maps.Keys(p.target))
	}
	return json.Marshal(s)
}

// ImportState implements core.Stateful.
func (p *Policy) ImportState(b []byte) error {
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("themis state: %w", err)
	}
	p.leases = make(map[core.JobKey]time.Time, len(s.Leases))
	for k, e := range s.Leases {
		jk, err := core.ParseJobKey(k)
		if err != nil {
			return fmt.Errorf("themis state: lease of %q: %w", k, err)
		}
		p.leases[jk] = e
	}
	p.first, p.marks = orEmpty(s.First), orEmpty(s.Marks)
	p.cont = auction.ContentionFrom(s.Cont)
	p.seed, p.reserving, p.rounds = s.Seed, s.Reserving, s.Rounds
	p.target = nil
	if s.Target != nil {
		p.target = map[string]bool{}
		for _, n := range s.Target {
			p.target[n] = true
		}
	}
	p.ran = map[string]bool{}
	for _, a := range s.Ran {
		p.ran[a] = true
	}
	p.last = s.Last
	if err := p.importDecided(s.Decided); err != nil {
		return fmt.Errorf("themis state: last decision: %w", err)
	}
	p.resume = true
	return nil
}

func orEmpty[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// LeaseEnd implements core.LeaseEnder.
func (p *Policy) LeaseEnd(job core.JobKey) (time.Time, bool) {
	e, ok := p.leases[job]
	return e, ok
}
