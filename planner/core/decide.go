package core

import "time"

// Planner is the decision core for one policy. It holds no state between
// rounds: everything it needs is in the State it is given.
type Planner struct {
	Policy Policy
}

// Decide returns this round's actions: releases for finished jobs that still
// hold a grant, then grants for queued jobs as the policy chooses.
func (p Planner) Decide(s State, now time.Time) Decision {
	var d Decision
	phase := make(map[JobKey]Phase, len(s.Jobs))
	for _, j := range s.Jobs {
		phase[j.Key] = j.Phase
	}
	held := make(map[JobKey]bool, len(s.Grants))
	var kept []Grant
	for _, g := range s.Grants {
		// A grant whose job is finished or unknown (deregistered) is released.
		if ph, ok := phase[g.Job]; !ok || ph == Finished {
			d.Actions = append(d.Actions, ReleaseAction{Grant: g})
			continue
		}
		held[g.Job] = true
		kept = append(kept, g)
	}
	var queued []Job
	for _, j := range s.Jobs {
		if j.Phase == Queued && !held[j.Key] {
			queued = append(queued, j)
		}
	}
	free := NewFreeGPUs(s.Nodes, kept)
	grants, waits := p.Policy.Schedule(now, queued, free)
	for _, g := range grants {
		d.Actions = append(d.Actions, GrantAction{Grant: g})
	}
	d.Waits = waits
	return d
}
