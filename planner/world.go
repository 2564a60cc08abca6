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

// newRound is the model reconcile starts from: the world's leases, records
// and pending grants, which the round copies before its first change to
// each (write), and its jobs as copies whose Err the round sets
// (nomad.Job.Reset: the snapshot keeps parsed jobs across rounds).
func newRound(w *world) *round {
	st := w.store
	r := &round{
		now: w.now, snap: w.snap, jobs: make(map[core.JobKey]*nomad.Job, len(w.snap.Jobs)), nodes: make(map[string]core.Node, len(w.snap.Nodes)),
		leases: st.leases, records: st.records, checkpoints: st.checkpoints, progress: st.progress, pending: st.pending,
		held: map[string]lease.JobLease{}, status: map[core.JobKey]lease.JobStatus{}, aside: maps.Clone(st.aside), world: w,
	}
	if r.aside == nil {
		r.aside = map[core.JobKey]string{}
	}
	r.list = make([]*nomad.Job, len(w.snap.Jobs))
	copies := make([]nomad.Job, len(w.snap.Jobs))
	for i, j := range w.snap.Jobs {
		copies[i] = *j
		c := &copies[i]
		c.Reset() // this round says what else is wrong with it
		r.list[i] = c
		r.jobs[c.Key] = c
	}
	for k, why := range w.snap.Unreadable {
		r.aside[k] = why
	}
	for _, n := range w.snap.Nodes {
		r.nodes[n.ID] = n
	}
	return r
}

// write returns *m for a change, made the round's own copy first when it
// is still the world's (*own false), so the world stays as read.
func write[V any](m *map[core.JobKey]V, own *bool) map[core.JobKey]V {
	if !*own {
		*m = maps.Clone(*m)
		if *m == nil {
			*m = map[core.JobKey]V{}
		}
		*own = true
	}
	return *m
}

// setLease, dropLease, setRecord, dropRecordOf, setPending and dropPending
// change the model's leases, records and pending grants.
func (r *round) setLease(k core.JobKey, l lease.JobLease) { write(&r.leases, &r.owns.leases)[k] = l }
func (r *round) dropLease(k core.JobKey)                  { delete(write(&r.leases, &r.owns.leases), k) }
func (r *round) setRecord(k core.JobKey, rec lease.JobRecord) {
	write(&r.records, &r.owns.records)[k] = rec
}
func (r *round) dropRecordOf(k core.JobKey) { delete(write(&r.records, &r.owns.records), k) }
func (r *round) setPending(k core.JobKey, pg lease.Pending) {
	write(&r.pending, &r.owns.pending)[k] = pg
}
func (r *round) dropPending(k core.JobKey) { delete(write(&r.pending, &r.owns.pending), k) }
