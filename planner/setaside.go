package planner

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// No job can stop a round (docs/adversary.md, part 1). A job that Nomad
// lists but whose definition cannot be read or parsed (Snapshot.Unreadable),
// or whose planner-written records in Consul (its lease, job record or
// pending grant) cannot be used, is set aside: status "unreadable" with the
// reason, logged once, left out of the decision, its lease neither renewed,
// revoked nor released, its record kept, and the GPUs its lease names held
// (grants on them wait, as for a job still stopping). Every other job is
// decided as usual, and the job is looked at again next round. Records the
// task drivers write (checkpoints, progress) only inform the decision: one
// that cannot be used is ignored, as if the driver had written none.

// StateUnreadable is the status of a job set aside.
const StateUnreadable = "unreadable"

// store is what a round reads from Consul.
type store struct {
	leases      map[core.JobKey]lease.JobLease
	records     map[core.JobKey]lease.JobRecord
	checkpoints map[core.JobKey]lease.CheckpointRecord
	progress    map[core.JobKey]lease.ProgressRecord
	pending     map[core.JobKey]lease.Pending
	// aside maps each job with a planner record that cannot be used to
	// why; badLease says a job lease was one of them.
	aside    map[core.JobKey]string
	badLease bool
}

// readStore reads the planner's keys and the drivers' records, setting
// aside what cannot be used; only a failed listing fails the round.
func (p *Planner) readStore(ctx context.Context) (*store, error) {
	s := &store{aside: map[core.JobKey]string{}}
	var bad []consul.BadKey
	// Leases first: a lease granted after the snapshot was read would
	// otherwise look like one whose job is gone.
	var err error
	s.leases, err = p.cfg.Store.Leases(ctx)
	if bad, err = consul.Unreadable(err); err != nil {
		return nil, err
	}
	s.badLease = len(bad) > 0
	seen := p.setAsideKeys(s.aside, bad, "its lease")
	s.records, err = p.cfg.Store.Records(ctx)
	if bad, err = consul.Unreadable(err); err != nil {
		return nil, err
	}
	seen = append(seen, p.setAsideKeys(s.aside, bad, "its job record")...)
	s.checkpoints, err = p.cfg.Store.Checkpoints(ctx)
	if bad, err = consul.Unreadable(err); err != nil {
		return nil, err
	}
	seen = append(seen, bad...)
	s.progress, err = p.cfg.Store.Progress(ctx)
	if bad, err = consul.Unreadable(err); err != nil {
		return nil, err
	}
	seen = append(seen, bad...)
	s.pending, err = p.cfg.Store.Pending(ctx)
	if bad, err = consul.Unreadable(err); err != nil {
		return nil, err
	}
	seen = append(seen, p.setAsideKeys(s.aside, bad, "its pending grant")...)
	if s.pending == nil {
		s.pending = map[core.JobKey]lease.Pending{}
	}
	p.warnBadKeys(seen)
	return s, nil
}

// setAsideKeys sets aside the job of each bad key (what says which record
// it is) and returns the keys.
func (p *Planner) setAsideKeys(aside map[core.JobKey]string, bad []consul.BadKey, what string) []consul.BadKey {
	for _, b := range bad {
		if b.Job == (core.JobKey{}) {
			continue // names no job: warned about, nothing to set aside
		}
		why := fmt.Sprintf("%s in Consul cannot be used (%s: %v); the planner leaves the job as it is until the key is fixed or deleted", what, b.Key, b.Err)
		if old, ok := aside[b.Job]; ok {
			why = old + "; " + why
		}
		aside[b.Job] = why
	}
	return bad
}

// warnBadKeys logs each key that cannot be used once, when it is first
// seen so (or its error changes), not every round.
func (p *Planner) warnBadKeys(bad []consul.BadKey) {
	now := make(map[string]string, len(bad))
	for _, b := range bad {
		now[b.Key] = b.Err.Error()
		if p.badKeys[b.Key] != now[b.Key] {
			p.log.Warn("a themis key in Consul cannot be used; set aside (a driver's record: ignored)", "key", b.Key, "error", b.Err)
		}
	}
	p.badKeys = now
}

// setAside leaves the round's set-aside jobs out: each one Nomad lists
// gets status "unreadable", and the GPUs their leases name are held. When a
// job lease could not be used, the GPU keys tell which GPUs it holds: every
// GPU key that no usable lease accounts for is held too.
func (r *round) setAside() {
	w := r.world
	if len(r.aside) == 0 && !w.store.badLease {
		return
	}
	listed := map[core.JobKey]bool{}
	for k := range r.snap.Unreadable {
		listed[k] = true
	}
	for _, j := range r.list {
		listed[j.Key] = true
	}
	for k, why := range r.aside {
		l, leased := r.leases[k]
		if leased {
			r.holdAside(l)
		}
		if !listed[k] {
			continue // not (or no longer) in Nomad: nothing to show
		}
		st := lease.JobStatus{State: StateUnreadable, Reason: why}
		if leased {
			st.Node, st.GPUs, st.LeaseID = l.NodeNames(), l.GPUs, l.LeaseID
		}
		r.status[k] = st
	}
	if !w.store.badLease {
		return
	}
	for _, id := range sortedGPUs(w.gpuLeases) {
		g := w.gpuLeases[id]
		k := core.JobKey{Namespace: g.Namespace, ID: g.JobID}
		if l, ok := r.leases[k]; ok && l.LeaseID == g.LeaseID && slices.Contains(l.GPUs, id) {
			continue // accounted for by a lease the round can use
		}
		r.holdAside(lease.JobLease{LeaseID: g.LeaseID, Namespace: g.Namespace, JobID: g.JobID, GPUs: []string{id}})
	}
	for _, b := range w.badGPUKeys {
		if id, ok := gpuOfKey(b.Key); ok {
			r.holdAside(lease.JobLease{Namespace: "?", JobID: "(GPU key " + b.Key + " cannot be used)", GPUs: []string{id}})
		}
	}
}

// holdAside holds the GPUs of a set-aside job's lease, and takes them from
// what the decision core may place on (asideNodes): unlike a revoking
// lease's GPUs, which go to the job the revoke makes room for, these are
// in use for as long as the job stays set aside.
func (r *round) holdAside(l lease.JobLease) {
	for _, id := range l.GPUs {
		r.held[id] = l
		if r.asideGPUs == nil {
			r.asideGPUs = map[string]bool{}
		}
		r.asideGPUs[id] = true
	}
}

// asideNodes is nodes with the GPUs set-aside jobs hold marked unhealthy,
// so the decision core places no job on them; nodes itself when there are
// none.
func (r *round) asideNodes(nodes []core.Node) []core.Node {
	if len(r.asideGPUs) == 0 {
		return nodes
	}
	out := make([]core.Node, len(nodes))
	for i, n := range nodes {
		n.GPUs = slices.Clone(n.GPUs)
		for g := range n.GPUs {
			if r.asideGPUs[n.GPUs[g].ID] {
				n.GPUs[g].Healthy = false
			}
		}
		out[i] = n
	}
	return out
}

// asideNote is what a waiting job's reason adds while set-aside jobs hold
// GPUs the decision core could not place on: "" when none do.
func (r *round) asideNote() string {
	if len(r.asideGPUs) == 0 {
		return ""
	}
	var who []string
	for _, l := range r.held {
		if k := (core.JobKey{Namespace: l.Namespace, ID: l.JobID}); r.asideGPUs[l.GPUs[0]] && !slices.Contains(who, k.String()) {
			who = append(who, k.String())
		}
	}
	slices.Sort(who)
	return fmt.Sprintf("; %d GPUs are held by jobs set aside as unreadable (%s)", len(r.asideGPUs), strings.Join(who, ", "))
}

func sortedGPUs(m map[string]lease.GPULease) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// gpuOfKey is the GPU a GPU key names.
func gpuOfKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, lease.GPUPrefix())
	if !ok || rest == "" {
		return "", false
	}
	id, err := url.PathUnescape(rest)
	return id, err == nil
}
