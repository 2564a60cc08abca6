package planner

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// round is reconcile's model of the world: what the round read (world),
// changed by every step planned so far as if it succeeded, so that later
// logic sees its effect (a lease revoked or released, a record created, a
// grant pending), and the statuses the steps leave.
type round struct {
	now time.Time
	// wake is the earliest deadline the round checked that has not come
	// yet (wakeAt; zero: none): its model changes then with the clock alone.
	wake  time.Time
	snap  *nomad.Snapshot
	world *world
	plan  *plan
	// jobs are the snapshot's jobs (list, in its order), copies whose Err
	// the round resets to ParseJob's and then sets from what it checks
	// against its records and config.
	jobs    map[core.JobKey]*nomad.Job
	list    []*nomad.Job
	nodes   map[string]core.Node
	leases  map[core.JobKey]lease.JobLease
	records map[core.JobKey]lease.JobRecord
	// checkpoints are the jobs' newest complete checkpoints, as the task
	// driver published them.
	checkpoints map[core.JobKey]lease.CheckpointRecord
	// progress is how far each job has come, as its workload reported.
	progress map[core.JobKey]lease.ProgressRecord
	// held maps each GPU that a lease being torn down still holds (a job
	// checkpointing after a revoke, or a stopped job's allocation not yet
	// terminal) to that lease. The decision core sees these GPUs as free,
	// so it hands them to the job that caused the preemption instead of
	// preempting another one; the grant itself waits until they are
	// released.
	held map[string]lease.JobLease
	// lost maps each lease a lost allocation still holds to when it is
	// free at the latest (lost.go), for the reasons of the grants it holds
	// up.
	lost   map[core.JobKey]time.Time
	status map[core.JobKey]lease.JobStatus
	// cells, with virtual clusters, returns a granted job's virtual GPUs,
	// which its lease records for the replay.
	cells func(core.JobKey) []string
	// gpuNode maps each GPU to its node, built when a grant needs it.
	gpuNode map[string]string
	// learned says the policy is told of a finished job's size this
	// round (its recorded state may change after the decision).
	learned bool
	// vcs is the round's virtual clusters (nil without), for the View.
	vcs *hived.Cluster
	// pending is the grants that wait for their GPUs (pending.go); shown
	// the grants of those the core sees as holding them this round.
	pending map[core.JobKey]lease.Pending
	shown   []core.Grant
	// aside maps each job set aside this round to why, and asideGPUs are
	// the GPUs their leases hold (setaside.go).
	aside     map[core.JobKey]string
	asideGPUs map[string]bool
	// owns says which of leases, records and pending are the round's own
	// copies yet (write).
	owns struct{ leases, records, pending bool }
}

// add plans a step.
func (r *round) add(s step) { r.plan.add(s) }

// fail records what could not be planned.
func (r *round) fail(err error) {
	if err != nil {
		r.plan.errs = append(r.plan.errs, err)
	}
}

// Reconcile runs one round: read, reconcile (observe, decide, act, as a
// plan), apply.
func (p *Planner) Reconcile(ctx context.Context) (err error) {
	var end roundEnd
	defer p.publish(time.Now(), &end, &err)
	// The marks first, before anything is read (steady.go).
	st := p.stack()
	m, marked := p.readMarks(ctx)
	if marked && p.unchanged(m, st, p.cfg.Now()) {
		end.skipped = true
		p.skipped.Add(1)
		return nil
	}
	p.steady = nil
	if p.statuses == nil {
		if err := p.loadStatuses(ctx); err != nil {
			return err
		}
	}
	if err := p.importState(ctx); err != nil {
		return err
	}
	w, err := p.read(ctx)
	if err != nil {
		return err
	}
	pl := p.reconcile(w)
	if pl.fatal == nil {
		p.recheck = pl.recheck
	}
	decided, err := p.apply(ctx, pl)
	if decided {
		end = roundEnd{r: pl.r, d: pl.decision}
	}
	if marked && decided && err == nil && pl.steady {
		p.steady = &steady{marks: m, stack: st, until: pl.until, at: w.now}
	}
	return err
}

// takesBack is the job whose grant a release or preemption ends.
func takesBack(a core.Action) (core.JobKey, bool) {
	switch a := a.(type) {
	case core.ReleaseAction:
		return a.Grant.Job, true
	case core.PreemptAction:
		return a.Grant.Job, true
	}
	return core.JobKey{}, false
}

// nodeNames names the nodes of a grant's GPUs, comma-separated.
func (r *round) nodeNames(g core.Grant) string {
	if parts, err := r.parts(g); err == nil {
		return lease.JobLease{Parts: parts}.NodeNames()
	}
	return r.nodes[g.Node].Name
}

// waitingFor explains a grant that waits for a stopping (or set-aside)
// job's GPUs.
func (r *round) waitingFor(victim lease.JobLease, node string, g core.Grant) string {
	why := ReasonGranted + fmt.Sprintf("%d GPUs on %s; waiting for %s/%s to stop", len(g.GPUs), node, victim.Namespace, victim.JobID)
	if r.aside[core.JobKey{Namespace: victim.Namespace, ID: victim.JobID}] != "" {
		why = ReasonGranted + fmt.Sprintf("%d GPUs on %s; waiting for %s/%s, set aside (unreadable), which holds them", len(g.GPUs), node, victim.Namespace, victim.JobID)
	}
	if until, ok := r.lost[core.JobKey{Namespace: victim.Namespace, ID: victim.JobID}]; ok {
		why += fmt.Sprintf(" (its allocation was lost with its node and may still run: until the node reports it stopped, at the latest %s)", until.Local().Format(time.TimeOnly))
	} else if victim.Revoke != nil {
		why += fmt.Sprintf(" (checkpointing, grace period until %s)", victim.Revoke.Deadline.Local().Format(time.TimeOnly))
	}
	return why
}

// afterDecision is the jobs as the decision leaves them: granted jobs run,
// preempted ones wait (what the policy's next change is computed from).
func afterDecision(jobs []core.Job, d core.Decision) []*core.Job {
	phase := map[core.JobKey]core.Phase{}
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.GrantAction:
			phase[a.Grant.Job] = core.Granted
		case core.PreemptAction:
			phase[a.Grant.Job] = core.Queued
		}
	}
	out := make([]*core.Job, len(jobs))
	for i := range jobs {
		j := jobs[i]
		if ph, ok := phase[j.Key]; ok {
			j.Phase = ph
		}
		out[i] = &j
	}
	return out
}

// leaseGrant is a lease in force as the decision core's grant.
func leaseGrant(l lease.JobLease) core.Grant {
	g := core.Grant{Job: core.JobKey{Namespace: l.Namespace, ID: l.JobID}, Node: l.NodeID, GPUs: l.GPUs}
	if len(l.Parts) > 0 {
		g.Node = "" // a multi-node gang, as the core's grants spell one
	}
	return g
}

func compareKeys(a, b core.JobKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
}
