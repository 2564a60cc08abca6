package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/httpapi"
)

// What a waiting job waits on: the leases of other jobs that hold GPUs it
// could use, and when each is due back. A job first in its queue with no
// room waits on them, not on a job ahead of it; themis job explain names
// them rather than saying nothing is ahead.

// blocker is one lease a waiting job waits on.
type blocker struct {
	Job     string `json:"job"`
	LeaseID string `json:"lease_id,omitempty"`
	GPUs    int    `json:"gpus"`
	Nodes   string `json:"nodes"`
	// Until is when its GPUs are due back: the revoke's deadline
	// (Revoking) or the lease's end; zero: the lease has no end (it is
	// held until its job ends or is preempted).
	Until    time.Time `json:"until,omitzero"`
	Revoking bool      `json:"revoking,omitempty"`
}

// maxBlockers is how many leases explain names; the rest are counted.
const maxBlockers = 5

// blockers are the leases a waiting job waits on, soonest due back first:
// for a job granted GPUs another still holds (waiting), the jobs its
// reason names; else, when no node has room for it, every other job's
// lease in its virtual cluster (all leases without virtual clusters).
func blockers(job httpapi.Job, nodes httpapi.NodesResponse, ls httpapi.LeasesResponse) []blocker {
	var held []httpapi.Lease
	for _, l := range ls.Leases {
		if l.Job != job.Job && (len(nodes.VCs) == 0 || l.VC == "" || l.VC == job.Request.VC) {
			held = append(held, l)
		}
	}
	if job.State == httpapi.StateWaiting {
		named := slices.DeleteFunc(slices.Clone(held), func(l httpapi.Lease) bool { return !namedIn(job.Reason, l.Job) })
		if len(named) > 0 {
			held = named
		}
	} else if r := roomFor(job, nodes); r.bestFree >= job.Request.GPUs && job.Request.GPUs <= r.nodeSize {
		return nil // room now: it waits for its turn
	}
	slices.SortStableFunc(held, func(a, b httpapi.Lease) int { return endOf(a).Compare(endOf(b)) })
	out := make([]blocker, 0, len(held))
	for _, l := range held {
		b := blocker{Job: l.Job, LeaseID: l.LeaseID, GPUs: len(l.GPUs), Nodes: nodeNames(l), Until: l.Ends}
		if l.Revoke != nil {
			b.Until, b.Revoking = l.Revoke.Deadline, true
		}
		out = append(out, b)
	}
	return out
}

// namedIn: the reason names job as the one it waits for ("waiting for
// default/x to stop", "waiting for default/x, set aside ...").
func namedIn(reason, job string) bool {
	return strings.Contains(reason, "waiting for "+job+" ") || strings.Contains(reason, "waiting for "+job+",")
}

// room is where a job could run now: the node with the most GPUs free to
// it, those free in all, and the largest node's size.
type room struct {
	bestNode                  string
	bestFree, total, nodeSize int
}

func roomFor(job httpapi.Job, nodes httpapi.NodesResponse) room {
	var r room
	for _, n := range nodes.Nodes {
		r.nodeSize = max(r.nodeSize, n.Total)
		if !n.Schedulable {
			continue
		}
		free := 0
		for _, g := range n.GPUs {
			if g.State == httpapi.GPUFree && (len(nodes.VCs) == 0 || g.VC == "" || g.VC == job.Request.VC) {
				free++
			}
		}
		r.total += free
		if free > r.bestFree {
			r.bestNode, r.bestFree = n.Name, free
		}
	}
	return r
}

// printBlockers writes the leases a job waits on, with when each is due
// back (now: the time the durations count from).
func printBlockers(out io.Writer, bs []blocker, policy string, now time.Time) {
	if len(bs) == 0 {
		return
	}
	fmt.Fprintln(out, "\nWaiting on")
	for i, b := range bs {
		if i == maxBlockers {
			fmt.Fprintf(out, "  and %s more (themis leases lists them)\n", plural(len(bs)-i, "lease"))
			break
		}
		in := ""
		if d := b.Until.Sub(now); !b.Until.IsZero() && d > 0 {
			in = " (in " + d.Round(time.Second).String() + ")"
		}
		var when string
		switch {
		case b.Revoking:
			when = "being preempted: its GPUs are free by " + clock(b.Until) + in
		case !b.Until.IsZero():
			when = "its lease ends at " + clock(b.Until) + in
		default:
			when = "its lease has no end: held until its job ends or the " + cmp.Or(policy, "planner's") + " policy preempts it"
		}
		lease := ""
		if b.LeaseID != "" {
			lease = ", lease " + safe(b.LeaseID)
		}
		fmt.Fprintf(out, "  %s: %s on %s%s; %s\n", safe(b.Job), plural(b.GPUs, "GPU"), safe(b.Nodes), lease, when)
	}
}
