package planner

import (
	"fmt"
	"time"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// Multi-node gangs. A gang larger than a node holds one lease with a part
// per node and runs as one task group with count = parts (nomad.Client.Pin).
// Nomad places the group's allocations one by one, so all-or-nothing is
// kept in two places:
//
//   - the task driver of each part starts the workload only once every
//     rank has joined the gang's rendezvous in Consul (driver/gang.go), so
//     no part trains while another is missing;
//   - the planner takes the whole gang back, through the revoke path, when
//     a part is missing: an allocation of the run failed or was lost (its
//     node died) while others still run, or Nomad has not placed every part
//     GangPlaceTimeout after the grant. The job re-queues whole, and its
//     parts resume from the gang's checkpoint.

// DefaultGangPlaceTimeout is how long after a grant Nomad may take to place
// every part of a gang (or a one-node job's allocation: unplaced) before
// the planner takes the lease back.
const DefaultGangPlaceTimeout = 2 * time.Minute

// brokenRun says why a granted job must be taken back whole, "" when its
// run is whole. Any job whose allocation was lost (its node died: Nomad
// cannot place the replacement, which is pinned to that node) re-queues;
// so does a multi-node gang missing a part.
func (p *Planner) brokenRun(r *round, l lease.JobLease) string {
	k := leaseGrant(l).Job
	timeout := p.cfg.GangPlaceTimeout
	if timeout <= 0 {
		timeout = DefaultGangPlaceTimeout
	}
	if len(l.Parts) == 0 {
		placed := false
		for _, a := range r.snap.Allocs[k] {
			if a.Created.Before(l.GrantedAt) {
				continue
			}
			placed = true
			if a.ClientStatus == "lost" {
				return fmt.Sprintf("its allocation on %s was lost (the node is down or gone); the job re-queues", l.NodeName)
			}
		}
		return unplaced(r, l, placed, timeout)
	}
	placed, live := map[string]bool{}, 0
	var gone []nomad.Alloc
	for _, a := range r.snap.Allocs[k] {
		if a.Created.Before(l.GrantedAt) || !l.OnNode(a.NodeID) {
			continue // an earlier run's
		}
		switch {
		case !a.Terminal():
			live++
			placed[a.NodeID] = true
		case a.ClientStatus == "complete":
			placed[a.NodeID] = true // this part finished its work
		default:
			gone = append(gone, a)
		}
	}
	if lost := lostPart(gone); len(gone) > 0 && (live > 0 || lost >= 0) {
		a := gone[max(lost, 0)]
		return fmt.Sprintf("gang broken: its part on %s is %s; the whole gang checkpoints and re-queues", r.nodes[a.NodeID].Name, a.ClientStatus)
	}
	if len(placed) < len(l.Parts) && len(gone) == 0 {
		if r.now.Sub(l.GrantedAt) > timeout {
			return fmt.Sprintf("gang incomplete: Nomad placed %d of its %d parts within %s of the grant; the whole gang re-queues", len(placed), len(l.Parts), timeout)
		}
		r.wakeAt(l.GrantedAt.Add(timeout + time.Nanosecond))
	}
	return ""
}

// lostPart is the index in gone of an allocation lost with its node, -1
// when none was: a gang with a lost part is broken even when no other part
// runs any more (the lost one may, and Nomad would re-place it on the same
// node when the node returns).
func lostPart(gone []nomad.Alloc) int {
	for i, a := range gone {
		if a.ClientStatus == "lost" {
			return i
		}
	}
	return -1
}

// unplaced says why a one-node lease is taken back when Nomad placed no
// allocation of its job within timeout of the grant (a job- or task-level
// constraint the pin keeps, memory, disk or a static port the node lacks:
// issue #45), "" otherwise (the round wakes at the deadline): no lease
// keeps GPUs idle for a job Nomad cannot place. The job re-queues.
func unplaced(r *round, l lease.JobLease, placed bool, timeout time.Duration) string {
	if placed {
		return ""
	}
	if r.now.Sub(l.GrantedAt) > timeout {
		return fmt.Sprintf("no placement: Nomad placed no allocation of the job on %s within %s of the grant (a constraint, or memory, disk or a static port the node lacks: `nomad job status` names it); the lease is taken back and the job re-queues", l.NodeName, timeout)
	}
	r.wakeAt(l.GrantedAt.Add(timeout + time.Nanosecond))
	return ""
}
