package core

import (
	"fmt"
	"sync"
)

// The preemptive strategy: the run set.

// preemptive keeps, in rank order, every job whose GPUs fit the cluster's
// capacity (the running jobs still restoring first), preempts the running
// jobs outside that set and places the queued jobs inside it.
func (p Scheduler) preemptive(d *Decision, ranked []*Job, counted runCount, grants []Grant, grantOf *grantIndex, free *FreeGPUs) {
	// The running jobs still restoring keep their GPUs (counted, with the
	// running jobs, as Decide found them).
	budget := free.Capacity() - counted.restoring
	granted := counted.granted
	// Choose, in rank order, the jobs that run. Once no GPU is left and
	// every running job has been seen, the rest of the ranking only waits:
	// on a long queue that is most of it.
	run := runPool.Get().(*[]bool)
	defer runPool.Put(run)
	*run = zeroed(*run, len(ranked))
	stop := len(ranked)
	for i, j := range ranked {
		if budget <= 0 && granted == 0 {
			stop = i
			break
		}
		if j.Phase == Granted {
			granted--
			if j.RestoreLeft > 0 {
				(*run)[i] = true
				continue
			}
		}
		if j.Phase == Queued && !free.Holds(j.GPUs) {
			continue // can never run here: it takes no one's GPUs
		}
		if j.GPUs <= budget {
			(*run)[i] = true
			budget -= j.GPUs
		} else if p.Policy.Blocking() {
			// Jobs behind the blocked one do not run; the running ones
			// among them are still found below.
			for k := i + 1; k < len(ranked); k++ {
				if ranked[k].Phase == Granted && ranked[k].RestoreLeft > 0 {
					(*run)[k] = true
				}
			}
			break
		}
	}
	for i, j := range ranked[:stop] {
		if j.Phase == Granted && !(*run)[i] {
			g := grants[grantOf.of(j.Key)]
			d.Actions = append(d.Actions, PreemptAction{Grant: g})
			free.give(g)
			free.charge(g, j, -1)
		}
	}
	for i, j := range ranked {
		if i == stop {
			// Past stop nothing runs, and nothing there was running.
			if !p.ExplainWaits {
				break
			}
		}
		if j.Phase != Queued {
			continue
		}
		if !free.Holds(j.GPUs) {
			p.wait(d, j, func() string { return free.neverHolds(j.GPUs) })
			continue
		}
		if i >= stop || !(*run)[i] {
			p.wait(d, j, func() string { return fmt.Sprintf("ranked below the running jobs by %s", p.Policy.Name()) })
			continue
		}
		if g, ok := free.PlaceJob(j, p.Policy.Consolidate(j)); ok {
			d.Actions = append(d.Actions, GrantAction{Grant: g})
			continue
		}
		p.wait(d, j, func() string {
			return fmt.Sprintf("waiting for %d free GPUs%s (%d free)", j.GPUs, consolidation(p.Policy.Consolidate(j)), free.Total())
		})
	}
}

var runPool = sync.Pool{New: func() any { return new([]bool) }}
