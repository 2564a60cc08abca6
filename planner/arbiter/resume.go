package arbiter

import (
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// A round interrupted. The live planner records the policy's state after
// every decision, before it carries the decision out (planner/policystate.go),
// so a planner killed while it acts leaves a state that already counts the
// round (its lease ends, its round counter) while the cluster shows only
// part of the answer: some jobs the auction stopped still run, some it
// granted still wait. A new leader that auctioned again from there would
// run another auction (the next round's tie-break, fresh leases for the
// jobs the round stopped) and could give another answer. So the state
// carries the last decision (decided), and the first decision after an
// import (resume: a restart, a new leader) carries out what of it is left
// (redo) instead of auctioning: the stops of jobs that still run where
// they ran, the grants of jobs that still wait. When nothing is left (the
// round was carried out: the planner says so, CarriedOut, and records the
// state again; or the planner stopped before recording the round, and the
// state is the one before it, whose auction then runs again with the same
// round counter) it decides as usual.

// decided is a decision as recorded.
type decided struct {
	At     time.Time    `json:"at"`
	Grants []grantState `json:"grants,omitempty"`
	Stops  []string     `json:"stops,omitempty"`
}

type grantState struct {
	Job  string   `json:"job"`
	Node string   `json:"node,omitempty"`
	GPUs []string `json:"gpus"`
}

// remember keeps the decision Allocate returns (for ExportState; the
// slices are not copied: core.Scheduler does not change them).
func (p *Policy) remember(now time.Time, grants []core.Grant, stops []core.JobKey) {
	p.lastAt, p.lastGrants, p.lastStops = now, grants, stops
}

// CarriedOut forgets the last decision: the live planner carried it out
// (every write of the round made). It reports whether there was one.
func (p *Policy) CarriedOut() bool {
	had := len(p.lastGrants)+len(p.lastStops) > 0
	p.lastGrants, p.lastStops = nil, nil
	return had
}

func (p *Policy) exportDecided() *decided {
	if len(p.lastGrants)+len(p.lastStops) == 0 {
		return nil
	}
	d := &decided{At: p.lastAt.UTC()}
	for _, g := range p.lastGrants {
		d.Grants = append(d.Grants, grantState{Job: g.Job.String(), Node: g.Node, GPUs: g.GPUs})
	}
	for _, k := range p.lastStops {
		d.Stops = append(d.Stops, k.String())
	}
	return d
}

func (p *Policy) importDecided(d *decided) error {
	p.lastAt, p.lastGrants, p.lastStops = time.Time{}, nil, nil
	if d == nil {
		return nil
	}
	p.lastAt = d.At
	for _, g := range d.Grants {
		k, err := core.ParseJobKey(g.Job)
		if err != nil {
			return err
		}
		p.lastGrants = append(p.lastGrants, core.Grant{Job: k, Node: g.Node, GPUs: g.GPUs})
	}
	for _, s := range d.Stops {
		k, err := core.ParseJobKey(s)
		if err != nil {
			return err
		}
		p.lastStops = append(p.lastStops, k)
	}
	return nil
}

// redo is what is left of the last decision: its stops of jobs still
// running where they ran, its grants of jobs still queued (or stopped
// again now, to move). ok is false when nothing is left.
func (p *Policy) redo(jobs []*core.Job, held []core.Grant) (grants []core.Grant, stops []core.JobKey, ok bool) {
	phase := make(map[core.JobKey]core.Phase, len(jobs))
	for _, j := range jobs {
		phase[j.Key] = j.Phase
	}
	on := make(map[core.JobKey][]string, len(held))
	for _, g := range held {
		on[g.Job] = g.GPUs
	}
	granted := make(map[core.JobKey][]string, len(p.lastGrants))
	for _, g := range p.lastGrants {
		granted[g.Job] = g.GPUs
	}
	for _, k := range p.lastStops {
		if phase[k] != core.Granted {
			continue // stopped
		}
		if gpus, ok := granted[k]; ok && sameSet(gpus, on[k]) {
			continue // moved already (it holds the GPUs the round gave it)
		}
		stops = append(stops, k)
	}
	for _, g := range p.lastGrants {
		if ph, ok := phase[g.Job]; ok && (ph == core.Queued || slices.Contains(stops, g.Job)) {
			grants = append(grants, g)
		}
	}
	return grants, stops, len(grants)+len(stops) > 0
}
