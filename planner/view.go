package planner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/lease"
)

// View is what one round leaves behind, for observers (Config.OnRound: the
// HTTP API and its metrics). It is built afresh at the end of every round
// and shares nothing the planner changes later: observers may keep it and
// read it from other goroutines.
type View struct {
	// Time is the round's clock (Config.Now), Duration how long the round
	// took (wall clock), Err what failed in it (nil: nothing).
	Time     time.Time
	Duration time.Duration
	Err      error
	// Decided is false when the round failed before the decision core ran
	// (Nomad or Consul could not be read): then only Time, Duration, Err
	// and Events are set, and observers keep the last decided view.
	Decided bool
	// Skipped is set when the round ended before reading because nothing
	// had changed since the last one (steady.go): the last decided view
	// still holds.
	Skipped bool
	// Policy is the stack's policy name; Placement how jobs are placed
	// ("free", or the virtual clusters' placement, e.g. "hived").
	Policy, Placement string
	// Nodes are the nodes with themis GPUs, as Nomad reported them.
	Nodes []core.Node
	// Leases are the leases in Consul at the end of the round, by job;
	// revoking ones carry their Revoke.
	Leases []lease.JobLease
	// Jobs are the themis jobs Nomad has, by key, each with its status.
	Jobs []JobView
	// Queue lists the queued and suspended jobs in the order the policy
	// ranked them (a grant deferred for held GPUs first), with their
	// position in their virtual cluster's queue.
	Queue []Queued
	// VCs are the virtual clusters' cells as the round's placer left
	// them (nil without virtual clusters); GPUCells maps each physical
	// GPU to its leaf cell (its VC and the virtual cell bound to it).
	VCs      []VCView
	GPUCells map[string]hived.CellView
	// Events are what the round did: grants, preemptions, releases and
	// promotions, in order, as they were written.
	Events []Event
	// Auction is the last auction round the stack's policy ran, per app
	// (the policy's core.Reporter, Themis; nil for other policies and
	// before the first auction of this planner's stack).
	Auction *core.RoundReport
}

// JobView is one themis job as the round saw it.
type JobView struct {
	Key    core.JobKey
	Status lease.JobStatus
	// Valid is false for a job whose stanza was rejected: GPUs, VC,
	// Priority and Class are then unset.
	Valid    bool
	GPUs     int
	VC       string
	Priority int
	Class    string
	// Record is the job's service record (zero: none yet).
	Record lease.JobRecord
	// ModifyIndex is the JobModifyIndex of the job version the round read
	// (a submission at or before it has been seen; the pin moves it on).
	ModifyIndex uint64
	// App, Iterations and Model are the stanza's (valid jobs only).
	App        string
	Iterations int
	Model      string
	// Progress is the job's last progress report (nil: none).
	Progress *lease.ProgressRecord
}

// Queued is one waiting job.
type Queued struct {
	Job core.JobKey
	VC  string
	// Position counts from 1 in the job's virtual cluster's queue. VC is
	// "" without virtual clusters: then there is one queue.
	Position int
	GPUs     int
	// State is "queued" or "suspended" (preempted, waiting to resume).
	State  string
	Reason string
	// Held is the description of the job's hold in Nomad (count 0, its
	// version tagged themis-held), "" when it is not held (yet).
	Held string
}

// VCView is one virtual cluster: its capacity and its cells.
type VCView struct {
	hived.VCView
	Cells []hived.CellView
}

// Event kinds.
const (
	EventGrant   = "grant"
	EventPreempt = "preempt"
	// EventRevoke is a lease taken back because its job was resubmitted
	// while running (not a preemption).
	EventRevoke  = "revoke"
	EventRelease = "release"
	EventPromote = "promote"
)

// Event is one thing a round did.
type Event struct {
	Time    time.Time
	Kind    string
	Job     core.JobKey
	Node    string
	GPUs    []string
	LeaseID string
	Reason  string
}

// recorder is the Store the planner uses when an observer is set: it
// passes every call through and notes the grants, revokes and releases
// that Consul accepted, which is what the round did.
type recorder struct {
	Store
	p *Planner
}

// ChangeMark forwards to the store's (steady.go): a store that cannot
// mark makes every round run.
func (s recorder) ChangeMark(ctx context.Context) (string, error) {
	m, ok := s.Store.(ChangeMarker)
	if !ok {
		return "", errors.New("the store has no change marks")
	}
	return m.ChangeMark(ctx)
}

func (s recorder) Grant(ctx context.Context, l lease.JobLease) error {
	err := s.Store.Grant(ctx, l)
	if err == nil {
		why := fmt.Sprintf("granted %d GPUs on %s by %s", len(l.GPUs), l.NodeNames(), s.p.stack().Policy.Name())
		if l.VC != "" {
			why += " in virtual cluster " + l.VC
		}
		s.p.note(Event{Time: l.GrantedAt, Kind: EventGrant, Job: leaseJob(l), Node: l.NodeNames(),
			GPUs: slices.Clone(l.GPUs), LeaseID: l.LeaseID, Reason: why})
	}
	return err
}

func (s recorder) Revoke(ctx context.Context, l lease.JobLease, rv lease.Revoke) (lease.JobLease, error) {
	marked, err := s.Store.Revoke(ctx, l, rv)
	if err == nil && marked.Revoke != nil {
		kind := EventPreempt
		if marked.Revoke.Resubmitted {
			kind = EventRevoke
		}
		s.p.note(Event{Time: marked.Revoke.Since, Kind: kind, Job: leaseJob(l), Node: l.NodeNames(),
			GPUs: slices.Clone(l.GPUs), LeaseID: l.LeaseID, Reason: marked.Revoke.Reason})
	}
	return marked, err
}

func (s recorder) Release(ctx context.Context, l lease.JobLease, rec *lease.JobRecord) error {
	err := s.Store.Release(ctx, l, rec)
	if err == nil {
		why := "" // filled in when the round is published, from the job's status
		if l.Revoke != nil {
			why = "revoked (" + l.Revoke.Reason + "): the job's allocation stopped"
		}
		s.p.note(Event{Time: s.p.cfg.Now().UTC(), Kind: EventRelease, Job: leaseJob(l), Node: l.NodeNames(),
			GPUs: slices.Clone(l.GPUs), LeaseID: l.LeaseID, Reason: why})
	}
	return err
}

func leaseJob(l lease.JobLease) core.JobKey { return core.JobKey{Namespace: l.Namespace, ID: l.JobID} }

// events buffers a round's events until it is published.
type events struct {
	mu  sync.Mutex
	buf []Event
}

func (p *Planner) note(e Event) {
	p.events.mu.Lock()
	p.events.buf = append(p.events.buf, e)
	p.events.mu.Unlock()
}

func (p *Planner) takeEvents() []Event {
	p.events.mu.Lock()
	defer p.events.mu.Unlock()
	out := p.events.buf
	p.events.buf = nil
	return out
}

// roundEnd is what a round that decided hands to publish.
type roundEnd struct {
	r *round
	d core.Decision
	// skipped: nothing changed, nothing was read (steady.go).
	skipped bool
}

// publish tells the observer (Config.OnRound) what the round left. end.r is
// nil when the round failed before deciding.
func (p *Planner) publish(start time.Time, end *roundEnd, err *error) {
	if p.cfg.OnRound == nil {
		return
	}
	v := View{Time: p.cfg.Now(), Duration: time.Since(start), Err: *err, Events: p.takeEvents(), Skipped: end.skipped}
	if end.r != nil {
		p.fillView(&v, end.r, end.d)
	}
	p.cfg.OnRound(v)
}

func (p *Planner) fillView(v *View, r *round, d core.Decision) {
	st := p.stack()
	v.Time, v.Decided = r.now, true
	v.Policy, v.Placement = st.Policy.Name(), string(st.Placement)
	for _, n := range r.snap.Nodes {
		n.GPUs = slices.Clone(n.GPUs)
		for i := range n.GPUs {
			n.GPUs[i].Path = slices.Clone(n.GPUs[i].Path)
		}
		v.Nodes = append(v.Nodes, n)
	}
	slices.SortFunc(v.Nodes, func(a, b core.Node) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	for _, l := range r.leases {
		l.GPUs, l.Cells = slices.Clone(l.GPUs), slices.Clone(l.Cells)
		if l.Revoke != nil {
			rv := *l.Revoke
			l.Revoke = &rv
		}
		v.Leases = append(v.Leases, l)
	}
	slices.SortFunc(v.Leases, func(a, b lease.JobLease) int { return compareKeys(leaseJob(a), leaseJob(b)) })

	for _, j := range r.list {
		jv := JobView{Key: j.Key, Record: r.records[j.Key]}
		if s, ok := p.statuses[j.Key]; ok {
			jv.Status = s
		} else if s, ok := r.status[j.Key]; ok {
			s.Namespace, s.JobID = j.Key.Namespace, j.Key.ID
			jv.Status = s
		}
		jv.Status.GPUs = slices.Clone(jv.Status.GPUs)
		if j.Err == nil {
			jv.Valid, jv.GPUs, jv.VC, jv.Priority, jv.Class = true, j.Intent.GPUs, j.Intent.VC, j.Intent.Priority, string(j.Intent.Class)
			jv.App, jv.Iterations, jv.Model = j.Intent.App, j.Intent.Iterations, j.Intent.Model
		}
		jv.ModifyIndex = j.ModifyIndex()
		if pr, ok := r.progress[j.Key]; ok {
			jv.Progress = &pr
		}
		v.Jobs = append(v.Jobs, jv)
	}
	for k := range r.snap.Unreadable {
		// Set aside: Nomad lists it, but it could not be read.
		jv := JobView{Key: k, Record: r.records[k], Status: p.statuses[k]}
		if s, ok := r.status[k]; ok && jv.Status.State == "" {
			s.Namespace, s.JobID = k.Namespace, k.ID
			jv.Status = s
		}
		jv.Status.GPUs = slices.Clone(jv.Status.GPUs)
		v.Jobs = append(v.Jobs, jv)
	}
	for k, s := range r.status {
		if s.State == StatePurged && r.jobs[k] == nil {
			// Held, then purged from Nomad: its record is kept (hold.go).
			s.Namespace, s.JobID = k.Namespace, k.ID
			v.Jobs = append(v.Jobs, JobView{Key: k, Record: r.records[k], Status: s})
		}
	}
	slices.SortFunc(v.Jobs, func(a, b JobView) int { return compareKeys(a.Key, b.Key) })

	v.Queue = queue(r, d)

	for i, e := range v.Events {
		if e.Kind == EventRelease && e.Reason == "" {
			v.Events[i].Reason = releaseReason(r, e.Job)
		}
	}
	for _, a := range d.Actions {
		if pa, ok := a.(core.PromoteAction); ok && r.records[pa.Job].PromotedAt.Equal(r.now.UTC()) {
			v.Events = append(v.Events, Event{Time: r.now.UTC(), Kind: EventPromote, Job: pa.Job,
				Reason: "promoted to the highest-priority queue by " + st.Policy.Name() + " (starving)"})
		}
	}

	if ar := st.Caps.Reporter; ar != nil {
		if rep, ok := ar.LastRound(); ok {
			rep.Apps = slices.Clone(rep.Apps)
			v.Auction = &rep
		}
	}

	if r.vcs != nil {
		for _, vc := range r.vcs.VCs() {
			cells, err := r.vcs.VirtualCells(vc.Name)
			if err != nil {
				continue
			}
			v.VCs = append(v.VCs, VCView{VCView: vc, Cells: cells})
		}
		v.GPUCells = map[string]hived.CellView{}
		gpus := map[string]bool{}
		for _, n := range v.Nodes {
			for _, g := range n.GPUs {
				gpus[g.ID] = true
			}
		}
		for _, c := range r.vcs.Physical() {
			if gpus[c.Name] {
				v.GPUCells[c.Name] = c
			}
		}
	}
}

// queue lists the round's waiting jobs in rank order: grants deferred for
// held GPUs first (they are next), then the core's waits, then jobs queued
// outside the core (being moved into the pending pool).
func queue(r *round, d core.Decision) []Queued {
	var out []Queued
	seen := map[core.JobKey]bool{}
	add := func(k core.JobKey) {
		st, ok := r.status[k]
		if seen[k] || !ok || (st.State != "queued" && st.State != "suspended") {
			return
		}
		seen[k] = true
		q := Queued{Job: k, State: st.State, Reason: st.Reason, Held: st.Held}
		if j := r.jobs[k]; j != nil {
			q.GPUs = j.Intent.GPUs
			if r.vcs != nil {
				q.VC = j.Intent.VC
			}
		}
		out = append(out, q)
	}
	for _, a := range d.Actions {
		if g, ok := a.(core.GrantAction); ok {
			add(g.Grant.Job)
		}
	}
	for _, w := range d.Waits {
		add(w.Job)
	}
	var rest []core.JobKey
	for k := range r.status {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(rest, compareKeys)
	for _, k := range rest {
		add(k)
	}
	pos := map[string]int{}
	for i := range out {
		pos[out[i].VC]++
		out[i].Position = pos[out[i].VC]
	}
	return out
}

// releaseReason says why a lease was released, from what the round knows
// of its job afterwards.
func releaseReason(r *round, k core.JobKey) string {
	j := r.jobs[k]
	switch {
	case j == nil:
		return "job purged from Nomad"
	case r.finished(j):
		return endReason(r.status[k])
	case strings.HasPrefix(r.status[k].Reason, "changed"):
		return "job changed while being granted"
	}
	return "stale lease: the job was resubmitted"
}
