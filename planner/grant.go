package planner

import (
	"fmt"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// grant leases GPUs to a job in Consul, then pins the job to them in
// Nomad (one step), and sets the job's status; false when the grant cannot
// be made (its GPUs are not where Nomad says; the round fails with why).
func (p *Planner) grant(r *round, g core.Grant) bool {
	j := r.jobs[g.Job]
	id, err := p.newLeaseID()
	if err != nil {
		r.fail(err)
		return false
	}
	parts, err := r.parts(g)
	if err != nil {
		r.fail(err)
		return false
	}
	pinned := j.NextVersion() // what the pin registers (own.go)
	l := lease.JobLease{
		LeaseID: id, Namespace: g.Job.Namespace, JobID: g.Job.ID, NodeID: parts[0].NodeID, NodeName: parts[0].NodeName,
		GPUs: g.GPUs, VC: j.Intent.VC, GrantedAt: r.now.UTC(), SubmitIndex: j.ModifyIndex(), Pinned: &pinned,
		Counts: r.heldCounts(j),
	}
	if len(parts) > 1 {
		l.Parts = parts
	}
	if le := p.stack().Caps.LeaseEnder; le != nil {
		if e, ok := le.LeaseEnd(g.Job); ok {
			l.Ends = e.UTC()
		}
	}
	if r.cells != nil {
		l.Cells = r.cells(g.Job)
	}
	s := r.pin(j, l)
	s.Kind = stepGrant
	r.add(s)
	r.setLease(g.Job, l)
	r.status[g.Job] = lease.JobStatus{State: "granted", Node: l.NodeNames(), GPUs: g.GPUs, LeaseID: id, Preemptions: r.records[g.Job].Preemptions}
	return true
}

// parts splits a grant's GPUs by node, in the grant's order (a multi-node
// gang's ranks); every part must hold as many GPUs as the first, since
// Nomad runs the parts as allocations of one task group.
func (r *round) parts(g core.Grant) ([]lease.Part, error) {
	var parts []lease.Part
	for _, id := range g.GPUs {
		node, ok := r.gpuNodeOf(id)
		if !ok {
			return nil, fmt.Errorf("grant %s: GPU %s is on no node Nomad reports", g.Job, id)
		}
		if n := len(parts); n == 0 || parts[n-1].NodeID != node {
			for _, p := range parts {
				if p.NodeID == node {
					return nil, fmt.Errorf("grant %s: GPUs of node %s are not together in %v", g.Job, p.NodeName, g.GPUs)
				}
			}
			parts = append(parts, lease.Part{NodeID: node, NodeName: r.nodes[node].Name, Addr: r.nodes[node].GangAddr})
		}
		parts[len(parts)-1].GPUs = append(parts[len(parts)-1].GPUs, id)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("grant %s: no GPUs", g.Job)
	}
	if g.Node != "" && (len(parts) > 1 || parts[0].NodeID != g.Node) {
		return nil, fmt.Errorf("grant %s: names node %s but its GPUs %v are elsewhere", g.Job, g.Node, g.GPUs)
	}
	for _, p := range parts[1:] {
		if len(p.GPUs) != len(parts[0].GPUs) {
			return nil, fmt.Errorf("grant %s: unequal parts (%d GPUs on %s, %d on %s): a multi-node gang runs as one task group, the same GPUs on every node",
				g.Job, len(parts[0].GPUs), parts[0].NodeName, len(p.GPUs), p.NodeName)
		}
	}
	return parts, nil
}

// gpuNodeOf is the node of a GPU Nomad reports.
func (r *round) gpuNodeOf(id string) (string, bool) {
	if r.gpuNode == nil {
		r.gpuNode = map[string]string{}
		for _, n := range r.snap.Nodes {
			for _, gpu := range n.GPUs {
				r.gpuNode[gpu.ID] = n.ID
			}
		}
	}
	node, ok := r.gpuNode[id]
	return node, ok
}

// pin is the step that pins j to lease l: the node pool of the lease's
// nodes, or why they give none.
func (r *round) pin(j *nomad.Job, l lease.JobLease) step {
	s := step{Kind: stepPin, Job: j.Key, Nomad: j, Lease: l, Restarts: r.records[j.Key].Preemptions}
	for i, part := range l.Nodes() {
		pp, ok := r.snap.Pools[part.NodeID]
		if !ok {
			s.PoolErr = fmt.Errorf("pin %s: node %s (%s) of lease %s is not in Nomad", j.Key, part.NodeName, part.NodeID, l.LeaseID)
			return s
		}
		if i > 0 && pp != s.Pool {
			s.PoolErr = fmt.Errorf("pin %s: lease %s spans node pools %s and %s; a Nomad job runs in one pool", j.Key, l.LeaseID, s.Pool, pp)
			return s
		}
		s.Pool = pp
	}
	return s
}
