package core

import (
	"fmt"
	"slices"
)

// The non-preemptive strategy: a walk of the queue in rank order.

// nonPreemptive starts queued jobs in rank order on the free GPUs. A
// blocking policy starts nothing behind the first job that does not fit
// (head-of-line blocking); a job its RoomMaker makes room for passes a
// blocked head and, when it does not fit, has victims preempted for it
// (room.go).
func (p Scheduler) nonPreemptive(d *Decision, ranked []*Job, grants []Grant, grantOf *grantIndex, free *FreeGPUs) {
	pre := p.caps.RoomMaker
	var room *Room // built when a job first needs room made
	var preempts []Action
	var head *Job
	for _, j := range ranked {
		if j.Phase != Queued {
			continue
		}
		switch {
		case !free.Holds(j.GPUs):
			p.wait(d, j, func() string { return free.neverHolds(j.GPUs) })
		case !free.everFits(j):
			p.wait(d, j, func() string {
				return fmt.Sprintf("needs %g CPU and %g memory on one node; no schedulable node has that much", j.CPU, j.Memory)
			})
		case head != nil && (pre == nil || !pre.MakesRoom(j)):
			// A job that may preempt for room (FitGpp's TE jobs) is not
			// held up by a blocked head.
			p.wait(d, j, func() string { return fmt.Sprintf("behind %s in the %s queue", head.Key, p.Policy.Name()) })
		default:
			if g, ok := free.PlaceJob(j, p.Policy.Consolidate(j)); ok {
				d.Actions = append(d.Actions, GrantAction{Grant: g})
				continue
			}
			if pre != nil && pre.MakesRoom(j) {
				if room == nil {
					room = newRoom(ranked, grants, grantOf, free)
					room.victims, room.tie = p.Victims, p.VictimTie
				}
				if g, ok := room.make(j, p.caps, p.Policy.Consolidate(j), &preempts); ok {
					d.Actions = append(d.Actions, GrantAction{Grant: g})
					continue
				}
			}
			if p.Policy.Blocking() {
				if head == nil {
					head = j
				}
				p.wait(d, j, func() string {
					return fmt.Sprintf("head of the %s queue: waiting for %d free GPUs%s (%d free)", p.Policy.Name(), j.GPUs, consolidation(p.Policy.Consolidate(j)), free.Total())
				})
				continue
			}
			p.wait(d, j, func() string {
				return fmt.Sprintf("waiting for %d free GPUs%s (%d free)", j.GPUs, consolidation(p.Policy.Consolidate(j)), free.Total())
			})
		}
	}
	if len(preempts) > 0 {
		p.retryRoom(d, ranked, room, &preempts, free)
	}
	preemptFirst(d, preempts)
}

// retryRoom gives the jobs that may preempt for room and still wait
// another try once this round's preemptions changed what is free (a later
// job's victim may make room for an earlier one too), until nothing more
// starts.
func (p Scheduler) retryRoom(d *Decision, ranked []*Job, room *Room, preempts *[]Action, free *FreeGPUs) {
	pre := p.caps.RoomMaker
	granted := map[JobKey]bool{}
	for _, a := range d.Actions {
		if g, ok := a.(GrantAction); ok {
			granted[g.Grant.Job] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, j := range ranked {
			if j.Phase != Queued || granted[j.Key] || !pre.MakesRoom(j) || !free.Holds(j.GPUs) || !free.everFits(j) {
				continue
			}
			g, ok := free.PlaceJob(j, p.Policy.Consolidate(j))
			if !ok {
				g, ok = room.make(j, p.caps, p.Policy.Consolidate(j), preempts)
			}
			if ok {
				d.Actions = append(d.Actions, GrantAction{Grant: g})
				granted[j.Key] = true
				changed = true
			}
		}
	}
	if p.ExplainWaits {
		d.Waits = slices.DeleteFunc(d.Waits, func(w Wait) bool { return granted[w.Job] })
	}
}
