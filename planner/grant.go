package planner

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-uuid"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// grant leases GPUs to a job in Consul, then pins the job to them in Nomad.
func (p *Planner) grant(ctx context.Context, r *round, g core.Grant) (consul.JobStatus, error) {
	j := r.jobs[g.Job]
	id, err := uuid.GenerateUUID()
	if err != nil {
		return consul.JobStatus{}, err
	}
	parts, err := r.parts(g)
	if err != nil {
		return consul.JobStatus{}, err
	}
	pinned := j.NextVersion() // what the pin registers (own.go)
	l := lease.JobLease{
		LeaseID: id, Namespace: g.Job.Namespace, JobID: g.Job.ID, NodeID: parts[0].NodeID, NodeName: parts[0].NodeName,
		GPUs: g.GPUs, VC: j.Intent.VC, GrantedAt: r.now.UTC(), SubmitIndex: j.ModifyIndex(), Pinned: &pinned,
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
	if err := p.cfg.Store.Grant(ctx, l); err != nil {
		return consul.JobStatus{}, err
	}
	r.leases[g.Job] = l
	if err := p.pin(ctx, r, j, l); err != nil {
		if errors.Is(err, nomad.ErrJobChanged) {
			// The user changed or removed the job meanwhile: undo, and let
			// the next round see the new version.
			if rerr := p.release(ctx, r, l, nil, "job changed while being granted"); rerr != nil {
				return consul.JobStatus{}, errors.Join(err, rerr)
			}
			return consul.JobStatus{State: "queued", Reason: "changed while being granted"}, nil
		}
		// The lease stands; the next round pins again (SubmitIndex matches).
		return consul.JobStatus{}, err
	}
	rec := r.records[g.Job]
	p.log.Info("granted", "job", g.Job, "node", l.NodeNames(), "gpus", g.GPUs, "lease", id, "restarts", rec.Preemptions)
	return consul.JobStatus{State: "granted", Node: l.NodeNames(), GPUs: g.GPUs, LeaseID: id, Preemptions: rec.Preemptions}, nil
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
			parts = append(parts, lease.Part{NodeID: node, NodeName: r.nodes[node].Name})
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

func (p *Planner) pin(ctx context.Context, r *round, j *nomad.Job, l lease.JobLease) error {
	var pool string
	for i, part := range l.Nodes() {
		pp, ok := r.snap.Pools[part.NodeID]
		if !ok {
			return fmt.Errorf("pin %s: node %s (%s) of lease %s is not in Nomad", j.Key, part.NodeName, part.NodeID, l.LeaseID)
		}
		if i > 0 && pp != pool {
			return fmt.Errorf("pin %s: lease %s spans node pools %s and %s; a Nomad job runs in one pool", j.Key, l.LeaseID, pool, pp)
		}
		pool = pp
	}
	return p.cfg.Nomad.Pin(ctx, j, l, pool, r.records[j.Key].Preemptions)
}
