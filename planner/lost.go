package planner

import (
	"fmt"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// A lost allocation is not a dead one. Nomad's servers mark an
// allocation lost when its node stops heartbeating; its task may still run:
// a client cut off from the servers keeps running it, and one killed with
// kill -9 leaves its executors (and their tasks) running until it is
// started again, when it learns the allocation is to stop and kills it,
// with the task's kill_timeout. So the GPUs of a lost allocation stay held
// (its lease is not released, grants on them wait) until one of:
//
//   - the node reported the allocation terminal: it came back and its
//     client status went from lost to complete or failed (a client that
//     comes back reports its allocations, and Nomad takes the client's
//     word for the client status);
//   - the lost bound passed: Nomad marked it lost at Modified, no later
//     than the node's last heartbeat plus the heartbeat TTL; a client still
//     alive stopped the task stop_on_client_after after its last
//     heartbeat (the pin's disconnect block: Config.StopOnClientAfter,
//     nomad.DefaultStopOnClientAfter by default), within the task's
//     kill_timeout (at most the clients' max_kill_timeout), and LostMargin
//     covers the clocks and the kill itself.
//
// Past the bound the lease goes and the job re-queues (on any node); a
// client that was killed outright and comes back later still runs the old
// task for a while, and the driver is what keeps a new task off its GPUs
// then (driver/gpuholds.go).

// LostMargin is added to the lost bound for the client's and the servers'
// clocks and the kill itself.
const LostMargin = 10 * time.Second

// lostUntil is when a lost allocation's task has stopped for certain, by
// the bound above: stopAfter being the pins' stop_on_client_after and
// killIn the longest its kill may take.
func lostUntil(a nomad.Alloc, stopAfter, killIn time.Duration) time.Time {
	return a.Modified.Add(stopAfter + killIn + LostMargin)
}

// stopOnClientAfter is the stop_on_client_after the pins set.
func (p *Planner) stopOnClientAfter() time.Duration {
	if p.cfg.StopOnClientAfter > 0 {
		return p.cfg.StopOnClientAfter
	}
	return nomad.DefaultStopOnClientAfter
}

// killBound is the longest the kill of job k's task may take: the clients'
// max_kill_timeout when the planner knows it (Nomad caps every
// kill_timeout to it), else the job's grace period.
func (p *Planner) killBound(r *round, k core.JobKey) time.Duration {
	if p.cfg.MaxKillTimeout > 0 {
		return p.cfg.MaxKillTimeout
	}
	if j := r.jobs[k]; j != nil {
		return j.Intent.GracePeriod
	}
	return 0
}

// lostHolding returns the allocation of lease l, lost with its node, whose
// task may still run (by the rules above), and until when at the latest;
// ok is false when there is none. The round wakes at that time.
func (p *Planner) lostHolding(r *round, k core.JobKey, l lease.JobLease) (nomad.Alloc, time.Time, bool) {
	for _, a := range r.snap.Allocs[k] {
		if a.ClientStatus != "lost" || !l.OnNode(a.NodeID) {
			continue
		}
		if until := lostUntil(a, p.stopOnClientAfter(), p.killBound(r, k)); r.now.Before(until) {
			r.wakeAt(until)
			return a, until, true
		}
	}
	return nomad.Alloc{}, time.Time{}, false
}

// lostReason is a revoking job's status while a lost allocation holds its
// GPUs: what it waits for, and until when at the latest.
func (r *round) lostReason(why string, a nomad.Alloc, until time.Time) string {
	node := a.NodeID
	if n, ok := r.nodes[a.NodeID]; ok && n.Name != "" {
		node = n.Name
	}
	return fmt.Sprintf("%s; its allocation %s on %s was lost with the node and may still run there: its GPUs stay held until the node reports it stopped, or until %s when the client has stopped it by itself",
		why, shortID(a.ID), node, until.UTC().Format(time.RFC3339))
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
