package planner

import (
	"context"
	"maps"
	"time"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// world is the cluster as one round read it: the planner's keys and the
// drivers' records in Consul, Nomad's snapshot, and the clock. read only
// reads, and nothing changes a world afterwards: reconcile models the
// effect of its steps on copies (newRound).
type world struct {
	now   time.Time
	snap  *nomad.Snapshot
	store *store
	// pendingPool is the node pool themis jobs wait for a grant in.
	pendingPool string
	// gpuLeases are the GPU keys, read only when a job lease could not be
	// used (store.badLease): they say which GPUs it holds; badGPUKeys are
	// those GPU keys that could not be used either.
	gpuLeases  map[string]lease.GPULease
	badGPUKeys []consul.BadKey
}

// read reads Consul and Nomad: leases first (a lease granted after the
// snapshot was read would otherwise look like one whose job is gone).
func (p *Planner) read(ctx context.Context) (*world, error) {
	st, err := p.readStore(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := p.cfg.Nomad.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	w := &world{now: p.cfg.Now(), snap: snap, store: st, pendingPool: p.cfg.Nomad.PendingPool()}
	if st.badLease {
		gpus, err := p.cfg.Store.GPULeases(ctx)
		w.badGPUKeys, err = consul.Unreadable(err)
		if err != nil {
			return nil, err
		}
		w.gpuLeases = gpus
	}
	return w, nil
}

// newRound is the model reconcile starts from: the world's records in maps
// of the round's own, and its jobs as copies whose Err the round sets
// (nomad.Job.Reset: the snapshot keeps parsed jobs across rounds).
func newRound(w *world) *round {
	st := w.store
	r := &round{
		now: w.now, snap: w.snap, jobs: map[core.JobKey]*nomad.Job{}, nodes: map[string]core.Node{},
		leases: maps.Clone(st.leases), records: maps.Clone(st.records), checkpoints: st.checkpoints, progress: st.progress,
		pending: maps.Clone(st.pending), held: map[string]lease.JobLease{}, status: map[core.JobKey]consul.JobStatus{},
		aside: maps.Clone(st.aside), world: w,
	}
	if r.leases == nil {
		r.leases = map[core.JobKey]lease.JobLease{}
	}
	if r.records == nil {
		r.records = map[core.JobKey]consul.JobRecord{}
	}
	if r.pending == nil {
		r.pending = map[core.JobKey]lease.Pending{}
	}
	if r.aside == nil {
		r.aside = map[core.JobKey]string{}
	}
	r.list = make([]*nomad.Job, len(w.snap.Jobs))
	for i, j := range w.snap.Jobs {
		c := *j
		c.Reset() // this round says what else is wrong with it
		r.list[i] = &c
		r.jobs[c.Key] = &c
	}
	for k, why := range w.snap.Unreadable {
		r.aside[k] = why
	}
	for _, n := range w.snap.Nodes {
		r.nodes[n.ID] = n
	}
	return r
}
