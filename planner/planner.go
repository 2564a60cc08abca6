// Package planner runs the themis planner: it watches Nomad, rebuilds the
// cluster's state from Nomad and Consul on every change, asks the decision
// core (package core) what to do, and carries out its actions through the
// Consul and Nomad adapters.
//
// Every round starts from what Nomad and Consul say, never from memory, so a
// planner that crashes or restarts loses nothing: leases live in Consul, pins
// live in the jobs, and the next round picks up where the last one stopped.
package planner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-uuid"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// Config wires a planner.
type Config struct {
	Nomad  *nomad.Client
	Store  *consul.Store
	Policy core.Policy
	// Resync is how often a full round runs even without events.
	Resync time.Duration
	Log    hclog.Logger
	// Now is the clock; the decision core itself never reads one.
	Now func() time.Time
}

// Planner is the live planner loop.
type Planner struct {
	cfg      Config
	log      hclog.Logger
	statuses map[core.JobKey]consul.JobStatus
}

// New returns a planner.
func New(cfg Config) *Planner {
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Planner{cfg: cfg, log: cfg.Log}
}

// Run reconciles on every Nomad event batch and every Resync until ctx ends.
func (p *Planner) Run(ctx context.Context) error {
	if err := p.cfg.Nomad.EnsurePendingPool(ctx); err != nil {
		return err
	}
	poke := make(chan struct{}, 1)
	trigger := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	go p.watch(ctx, trigger)
	tick := time.NewTicker(p.cfg.Resync)
	defer tick.Stop()
	trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poke:
		case <-tick.C:
		}
		if err := p.Reconcile(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("reconcile failed; retrying on the next event or resync", "error", err)
			time.AfterFunc(time.Second, trigger)
		}
	}
}

// watch follows the event stream, reconnecting with backoff; every
// reconnect triggers a full round (the resync), so missed events cost nothing.
func (p *Planner) watch(ctx context.Context, trigger func()) {
	var index uint64
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		var err error
		index, err = p.cfg.Nomad.Watch(ctx, index, trigger)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		p.log.Warn("Nomad event stream ended; resyncing", "error", err, "retry_in", backoff)
		trigger()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// round is one reconcile's view of Nomad: the snapshot, with its jobs and
// nodes indexed.
type round struct {
	snap  *nomad.Snapshot
	jobs  map[core.JobKey]*nomad.Job
	nodes map[string]core.Node
}

// Reconcile runs one round: read, decide, act.
func (p *Planner) Reconcile(ctx context.Context) error {
	if p.statuses == nil {
		if err := p.loadStatuses(ctx); err != nil {
			return err
		}
	}
	snap, err := p.cfg.Nomad.Snapshot(ctx)
	if err != nil {
		return err
	}
	leases, err := p.cfg.Store.Leases(ctx)
	if err != nil {
		return err
	}
	r := &round{snap: snap, jobs: map[core.JobKey]*nomad.Job{}, nodes: map[string]core.Node{}}
	for _, n := range snap.Nodes {
		r.nodes[n.ID] = n
	}
	now := p.cfg.Now()
	state := core.State{Nodes: snap.Nodes}
	status := map[core.JobKey]consul.JobStatus{}
	var errs []error
	for _, j := range snap.Jobs {
		r.jobs[j.Key] = j
		l, has := leases[j.Key]
		if j.Err != nil {
			// Not in the core's jobs: a lease it still holds is released.
			if !j.Finished() {
				status[j.Key] = consul.JobStatus{State: "rejected", Reason: j.Err.Error()}
			}
			continue
		}
		phase := core.Queued
		switch {
		case j.Finished():
			phase = core.Finished
			status[j.Key] = consul.JobStatus{State: "finished"}
		case has && j.PinnedLease() == l.LeaseID:
			phase = core.Granted
		case has && j.ModifyIndex() == l.SubmitIndex:
			// Granted but never pinned: the planner stopped in between.
			phase = core.Granted
			if err := p.pin(ctx, r, j, l); err != nil {
				errs = append(errs, err)
			}
		case has:
			// Resubmitted since its grant: the old lease is stale.
			if err := p.release(ctx, l, "job resubmitted"); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(leases, j.Key)
		case j.Pool() != p.cfg.Nomad.PendingPool():
			if err := p.cfg.Nomad.Adopt(ctx, j); err != nil && !errors.Is(err, nomad.ErrJobChanged) {
				errs = append(errs, err)
			} else {
				p.log.Info("moved a themis job into the pending pool to wait for a grant", "job", j.Key, "from_pool", j.Pool())
			}
			status[j.Key] = consul.JobStatus{State: "queued", Reason: "moved to node pool " + p.cfg.Nomad.PendingPool() + " to wait for a grant"}
			continue
		}
		if phase == core.Granted {
			status[j.Key] = consul.JobStatus{State: "granted", Node: l.NodeName, GPUs: l.GPUs, LeaseID: l.LeaseID}
		}
		state.Jobs = append(state.Jobs, j.CoreJob(phase))
	}
	for _, l := range leases {
		state.Grants = append(state.Grants, core.Grant{Job: core.JobKey{Namespace: l.Namespace, ID: l.JobID}, Node: l.NodeID, GPUs: l.GPUs})
	}
	slices.SortFunc(state.Grants, func(a, b core.Grant) int { return compareKeys(a.Job, b.Job) })

	d := core.Planner{Policy: p.cfg.Policy, ExplainWaits: true, SingleNode: true}.Decide(state, now)
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.ReleaseAction:
			if err := p.release(ctx, leases[a.Grant.Job], "job finished"); err != nil {
				errs = append(errs, err)
			}
		case core.GrantAction:
			st, err := p.grant(ctx, r, a.Grant, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			status[a.Grant.Job] = st
		}
	}
	for _, w := range d.Waits {
		status[w.Job] = consul.JobStatus{State: "queued", Reason: w.Reason}
	}
	if err := p.writeStatuses(ctx, status, now); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (p *Planner) grant(ctx context.Context, r *round, g core.Grant, now time.Time) (consul.JobStatus, error) {
	j := r.jobs[g.Job]
	id, err := uuid.GenerateUUID()
	if err != nil {
		return consul.JobStatus{}, err
	}
	node := r.nodes[g.Node]
	l := lease.JobLease{
		LeaseID: id, Namespace: g.Job.Namespace, JobID: g.Job.ID, NodeID: g.Node, NodeName: node.Name,
		GPUs: g.GPUs, VC: j.Intent.VC, GrantedAt: now.UTC(), SubmitIndex: j.ModifyIndex(),
	}
	if err := p.cfg.Store.Grant(ctx, l); err != nil {
		return consul.JobStatus{}, err
	}
	if err := p.pin(ctx, r, j, l); err != nil {
		if errors.Is(err, nomad.ErrJobChanged) {
			// The user changed or removed the job meanwhile: undo, and let
			// the next round see the new version.
			if rerr := p.cfg.Store.Release(ctx, l); rerr != nil {
				return consul.JobStatus{}, errors.Join(err, rerr)
			}
			p.log.Info("job changed while being granted; lease withdrawn", "job", g.Job)
			return consul.JobStatus{State: "queued", Reason: "changed while being granted"}, nil
		}
		// The lease stands; the next round pins again (SubmitIndex matches).
		return consul.JobStatus{}, err
	}
	p.log.Info("granted", "job", g.Job, "node", node.Name, "gpus", g.GPUs, "lease", id)
	return consul.JobStatus{State: "granted", Node: node.Name, GPUs: g.GPUs, LeaseID: id}, nil
}

func (p *Planner) pin(ctx context.Context, r *round, j *nomad.Job, l lease.JobLease) error {
	pool, ok := r.snap.Pools[l.NodeID]
	if !ok {
		return fmt.Errorf("pin %s: node %s (%s) of lease %s is not in Nomad", j.Key, l.NodeName, l.NodeID, l.LeaseID)
	}
	return p.cfg.Nomad.Pin(ctx, j, core.Grant{Job: j.Key, Node: l.NodeID, GPUs: l.GPUs}, pool, l.LeaseID)
}

func (p *Planner) release(ctx context.Context, l lease.JobLease, why string) error {
	if err := p.cfg.Store.Release(ctx, l); err != nil {
		return err
	}
	p.log.Info("released", "job", l.Namespace+"/"+l.JobID, "gpus", l.GPUs, "lease", l.LeaseID, "why", why)
	return nil
}

func (p *Planner) loadStatuses(ctx context.Context) error {
	sts, err := p.cfg.Store.Statuses(ctx)
	if err != nil {
		return err
	}
	p.statuses = make(map[core.JobKey]consul.JobStatus, len(sts))
	for _, st := range sts {
		p.statuses[core.JobKey{Namespace: st.Namespace, ID: st.JobID}] = st
	}
	return nil
}

// writeStatuses writes the records that changed and deletes those of jobs
// that left Nomad.
func (p *Planner) writeStatuses(ctx context.Context, next map[core.JobKey]consul.JobStatus, now time.Time) error {
	var errs []error
	for k, st := range next {
		st.Namespace, st.JobID = k.Namespace, k.ID
		old, ok := p.statuses[k]
		if ok && old.State == st.State && old.Reason == st.Reason && old.LeaseID == st.LeaseID {
			continue
		}
		st.Since = now.UTC()
		if err := p.cfg.Store.PutStatus(ctx, st); err != nil {
			errs = append(errs, err)
			continue
		}
		if st.State == "rejected" && (!ok || old.Reason != st.Reason) {
			p.log.Error("rejected a themis job", "job", k, "error", st.Reason)
		}
		p.statuses[k] = st
	}
	for k := range p.statuses {
		if _, ok := next[k]; ok {
			continue
		}
		if err := p.cfg.Store.DeleteStatus(ctx, k); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(p.statuses, k)
	}
	return errors.Join(errs...)
}

func compareKeys(a, b core.JobKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
}
