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
	node := r.nodes[g.Node]
	l := lease.JobLease{
		LeaseID: id, Namespace: g.Job.Namespace, JobID: g.Job.ID, NodeID: g.Node, NodeName: node.Name,
		GPUs: g.GPUs, VC: j.Intent.VC, GrantedAt: r.now.UTC(), SubmitIndex: j.ModifyIndex(),
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
	p.log.Info("granted", "job", g.Job, "node", node.Name, "gpus", g.GPUs, "lease", id, "restarts", rec.Preemptions)
	return consul.JobStatus{State: "granted", Node: node.Name, GPUs: g.GPUs, LeaseID: id, Preemptions: rec.Preemptions}, nil
}

func (p *Planner) pin(ctx context.Context, r *round, j *nomad.Job, l lease.JobLease) error {
	pool, ok := r.snap.Pools[l.NodeID]
	if !ok {
		return fmt.Errorf("pin %s: node %s (%s) of lease %s is not in Nomad", j.Key, l.NodeName, l.NodeID, l.LeaseID)
	}
	return p.cfg.Nomad.Pin(ctx, j, core.Grant{Job: j.Key, Node: l.NodeID, GPUs: l.GPUs}, pool, l.LeaseID, r.records[j.Key].Preemptions)
}
