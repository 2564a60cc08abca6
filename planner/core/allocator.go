package core

import (
	"fmt"
	"time"
)

// Allocator is implemented by policies that choose GPUs themselves rather
// than rank jobs for the generic scheduler: Themis's arbiter, whose
// partial-allocation auction decides how many GPUs each app gets, where,
// and for how long (its leases). Decide hands such a policy the active jobs
// (after Rank and promotions), the free GPUs and the running jobs' grants;
// the policy answers with the grants it wants for queued jobs and the
// running jobs it stops (preemptions, e.g. at the end of a lease).
//
// Decide checks the answer rather than trusting it: every preempted job
// must be running (its GPUs then count as free for the grants), and every
// grant must name a queued job, or one preempted in the same answer, at
// most once, and GPUs that are free, which it takes with FreeGPUs.Take (so
// no GPU goes to two jobs). A grant that fails a check is dropped (a Wait
// says why when Scheduler.ExplainWaits is set). The Decision lists the
// preemptions first, then the grants, in the allocator's order. A policy
// with a Placer is never asked to allocate: the Placer path takes
// precedence.
type Allocator interface {
	Allocate(now time.Time, jobs []*Job, free *FreeGPUs, grants []Grant) (grant []Grant, preempt []JobKey)
}

// allocate runs an Allocator policy and applies the checks above.
func (p Scheduler) allocate(d *Decision, a Allocator, now time.Time, active []*Job, grants []Grant, grantOf *grantIndex, free *FreeGPUs) {
	held := make([]Grant, 0, len(grants))
	for _, j := range active {
		if j.Phase == Granted {
			held = append(held, grants[grantOf.of(j.Key)])
		}
	}
	want, stop := a.Allocate(now, active, free, held)
	phase := make(map[JobKey]Phase, len(active))
	byKey := make(map[JobKey]*Job, len(active))
	for _, j := range active {
		phase[j.Key] = j.Phase
		byKey[j.Key] = j
	}
	for _, k := range stop {
		if phase[k] != Granted {
			continue // not running, or preempted twice: nothing to stop
		}
		g := grants[grantOf.of(k)]
		d.Actions = append(d.Actions, PreemptAction{Grant: g})
		free.give(g)
		free.charge(g, byKey[k], -1)
		phase[k] = Queued
	}
	for _, g := range want {
		j, known := byKey[g.Job]
		switch {
		case !known:
			p.waitKey(d, g.Job, "allocator granted GPUs to a job that is not active")
		case phase[g.Job] != Queued:
			p.waitKey(d, g.Job, "allocator granted GPUs to a job that runs or was granted already")
		case len(g.GPUs) != j.GPUs:
			p.waitKey(d, g.Job, fmt.Sprintf("allocator granted %d GPUs to a gang of %d", len(g.GPUs), j.GPUs))
		case free.equalParts && !free.Pinnable(g):
			p.waitKey(d, g.Job, fmt.Sprintf("%s placed the gang across nodes in a shape the live planner cannot run (a gang that a node holds runs on one node; a larger one in equal parts); it waits for a better offer", p.Policy.Name()))
		case !free.Take(g):
			p.waitKey(d, g.Job, "allocator granted GPUs that are not free")
		default:
			free.charge(g, j, 1)
			phase[g.Job] = Granted
			d.Actions = append(d.Actions, GrantAction{Grant: g})
		}
	}
	if p.ExplainWaits {
		for _, j := range active {
			if phase[j.Key] == Queued {
				p.wait(d, j, func() string { return fmt.Sprintf("not allocated GPUs by %s this round", p.Policy.Name()) })
			}
		}
	}
}

func (p Scheduler) waitKey(d *Decision, k JobKey, reason string) {
	if p.ExplainWaits {
		d.Waits = append(d.Waits, Wait{Job: k, Reason: reason})
	}
}

// FreeNodes is the free GPUs as nodes: each schedulable node that has free
// GPUs (or GPUs of the extra grants, counted free as if released), in name
// order, with those GPUs only. An Allocator builds its offer from it.
func (f *FreeGPUs) FreeNodes(extra ...Grant) []Node {
	more := map[string]bool{}
	for _, g := range extra {
		for _, id := range g.GPUs {
			more[id] = true
		}
	}
	var out []Node
	for i, n := range f.x.nodes {
		off := f.x.offset[i]
		var gpus []GPU
		for s, g := range n.gpus {
			if f.avail[off+s] || more[g.ID] {
				gpus = append(gpus, g)
			}
		}
		if len(gpus) == 0 {
			continue
		}
		c := *n.node
		c.GPUs = gpus
		out = append(out, c)
	}
	return out
}

// Locate is the node that holds a healthy GPU of a schedulable node.
func (f *FreeGPUs) Locate(gpu string) (*Node, bool) {
	p, ok := f.x.gpus[gpu]
	if !ok {
		return nil, false
	}
	return f.x.nodes[p.node].node, true
}
