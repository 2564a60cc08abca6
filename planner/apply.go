package planner

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
)

// apply carries out a plan, in order; it is the only code of the planner
// that writes to Consul or Nomad. reconcile planned every step as if the
// ones before it succeed, so a step that fails (or is skipped) makes the
// applier skip what depends on it:
//
//   - every later step of the same job (a suspension after its revoke mark,
//     a pin after its grant, a pending grant's deletion after the lease
//     that carries it out, a record's deletion after the lease's release);
//   - every later grant of a GPU that a failed or skipped release was to
//     free (a GPU is leased to one job at a time: Consul's check-and-set
//     would refuse the grant anyway).
//
// Other jobs' steps go on: one bad job does not block the rest. A job
// whose revoke, release, withdrawal, pending grant or grant did not happen
// keeps the status it had (it is not written this round: the plan's says
// what those steps would have left); the status planned with a suspension,
// pin or adoption that failed still says what is so (the lease is being
// taken back, is granted, the job is rejected). The round returns every
// error, joined; the next round reads again and plans what is left. Where
// a step needs what an earlier one wrote, the applier threads it: a
// record's Consul index after the write that created or changed it, a
// revoke mark another planner wrote first. A failure to record the policy's state stops the round before the
// decision is acted on (decided is false then: the View keeps the last
// decided round).
//
// A run of consecutive grants writes its leases one after another, in
// order (each a check-and-set transaction), and pins each job as soon as
// its lease committed; with Config.PinWorkers > 1 (not the default) those pins run
// concurrently (a pin is one check-and-set register of its job in Nomad,
// the bulk of a grant's time), and the run's pins are settled, in plan order,
// before the step after the run: no later step of a granted job, and no
// status, is written before its pin ended.
func (p *Planner) apply(ctx context.Context, pl *plan) (decided bool, err error) {
	a := &applier{p: p, pl: pl, failed: map[core.JobKey]bool{}, stale: map[core.JobKey]bool{}, notFreed: map[string]bool{},
		records: map[core.JobKey]lease.JobRecord{}, leases: map[core.JobKey]*lease.JobLease{}}
	if n := int(p.pinWorkers.Load()); n > 1 {
		a.pins = &pinRun{sem: make(chan struct{}, n)}
	}
	errs := pl.errs
	for _, s := range pl.steps {
		if s.Kind != stepGrant {
			// Whatever follows a run of grants sees their pins done.
			a.finishPins(ctx)
		}
		switch {
		case s.Kind == stepSaveState:
			if err := p.saveState(ctx); err != nil {
				return false, errors.Join(append(append(errs, a.errs...), err)...)
			}
			decided = true
			continue
		case s.Kind == stepStatuses:
			a.keepStatuses()
			a.errs = append(a.errs, p.writeStatuses(ctx, pl.status, pl.r.now))
			continue
		case a.blocked(s):
			a.skip(s)
			continue
		}
		if err := a.do(ctx, s); err != nil {
			a.errs = append(a.errs, err)
			a.skip(s)
		}
	}
	a.finishPins(ctx)
	a.settle()
	errs = append(errs, a.errs...)
	if pl.fatal != nil {
		errs = append(errs, pl.fatal)
	}
	return decided, errors.Join(errs...)
}

// applier is one plan's carrying out.
type applier struct {
	p  *Planner
	pl *plan
	// failed are the jobs with a step that failed or was skipped, stale
	// those of them whose planned status that makes untrue (statusSteps),
	// notFreed the GPUs of releases that did not happen.
	failed   map[core.JobKey]bool
	stale    map[core.JobKey]bool
	notFreed map[string]bool
	// records are the job records written this round, with their new
	// Consul index; leases the job leases as this round left them in
	// Consul (nil: released).
	records map[core.JobKey]lease.JobRecord
	leases  map[core.JobKey]*lease.JobLease
	errs    []error
	// pins, when set, carries out the pins of a run of grants
	// concurrently (Config.PinWorkers > 1); nil: each grant pins its job
	// right after its lease.
	pins *pinRun
}

// pinRun is the Nomad pins of a run of consecutive grant steps, started
// as each grant's lease transaction commits (in plan order, on the
// applier's goroutine) and run by at most cap(sem) goroutines at once.
// The pins only call Nomad; what they leave (the log line, a release of
// the lease of a job changed meanwhile, the status, the failed and stale
// jobs) is settled on the applier's goroutine in plan order once the run
// ends (finishPins), before any step that follows the run.
type pinRun struct {
	sem  chan struct{}
	wg   sync.WaitGroup
	pins []*pinning
}

// pinning is one grant's pin in flight; err is set by its goroutine
// before wg.Done.
type pinning struct {
	s   step
	err error
}

// start pins s's job to its lease in the background.
func (r *pinRun) start(ctx context.Context, c Cluster, s step) {
	pg := &pinning{s: s}
	r.pins = append(r.pins, pg)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.sem <- struct{}{}
		defer func() { <-r.sem }()
		pg.err = c.Pin(ctx, s.Nomad, s.Lease, s.Pool, s.Restarts)
	}()
}

// finishPins waits for the run of grants' pins and settles each, in plan
// order, as grant does when it pins itself.
func (a *applier) finishPins(ctx context.Context) {
	if a.pins == nil || len(a.pins.pins) == 0 {
		return
	}
	a.pins.wg.Wait()
	for _, pg := range a.pins.pins {
		if err := a.pinned(ctx, pg.s, pg.err); err != nil {
			a.errs = append(a.errs, err)
			a.skip(pg.s)
		}
	}
	a.pins.pins = a.pins.pins[:0]
}

// blocked reports whether a step depends on one that did not happen.
func (a *applier) blocked(s step) bool {
	if s.Job != (core.JobKey{}) && a.failed[s.Job] {
		return true
	}
	for _, id := range s.needs() {
		if a.notFreed[id] {
			return true
		}
	}
	return false
}

// statusSteps are the steps whose job's planned status is untrue when
// they do not happen.
var statusSteps = map[stepKind]bool{stepRevoke: true, stepRelease: true, stepWithdraw: true, stepPend: true, stepGrant: true, stepHold: true}

// skip notes a step that did not happen.
func (a *applier) skip(s step) {
	if s.Job != (core.JobKey{}) {
		a.failed[s.Job] = true
		if statusSteps[s.Kind] {
			a.stale[s.Job] = true
		}
	}
	for _, id := range s.frees() {
		a.notFreed[id] = true
	}
}

// record is the record a step writes, at the index of this round's last
// write of it.
func (a *applier) record(rec *lease.JobRecord) *lease.JobRecord {
	if rec == nil {
		return nil
	}
	c := *rec
	if w, ok := a.records[c.Key()]; ok {
		c = lease.WithIndex(c, w.Index())
	}
	return &c
}

// do carries out one step.
func (a *applier) do(ctx context.Context, s step) error {
	p, k := a.p, s.Job
	switch s.Kind {
	case stepRevoke:
		return a.revoke(ctx, s)
	case stepSetVersions:
		marked, err := p.cfg.Store.SetVersions(ctx, s.Lease)
		if err != nil {
			return err
		}
		a.leases[k] = &marked
		if s.Why != "" {
			p.log.Info(s.Why, "job", k, "lease", marked.LeaseID, "version", s.Lease.Pinned.Version)
		}
	case stepSuspend:
		return a.suspend(ctx, s)
	case stepRelease:
		return a.release(ctx, s.Lease, a.record(s.Record), s.Why)
	case stepWithdraw:
		if err := p.cfg.Store.DeletePending(ctx, k); err != nil {
			return err
		}
		p.log.Info("pending grant withdrawn", "job", k, "why", s.Why)
	case stepPend:
		if err := p.cfg.Store.PutPending(ctx, s.Pending); err != nil {
			return err
		}
		p.log.Info("grant pending until its GPUs are released", "job", k, "gpus", s.Pending.GPUs, "lease_ends", s.Pending.Ends, "why", s.Why)
	case stepGrant:
		return a.grant(ctx, s)
	case stepDropPending:
		return p.cfg.Store.DeletePending(ctx, k)
	case stepPin:
		if s.PoolErr != nil {
			return s.PoolErr
		}
		return p.cfg.Nomad.Pin(ctx, s.Nomad, s.Lease, s.Pool, s.Restarts)
	case stepAdopt:
		if err := p.cfg.Nomad.Adopt(ctx, s.Nomad); err != nil && !errors.Is(err, nomad.ErrJobChanged) {
			return err
		}
		p.log.Info("moved a themis job into the pending pool to wait for a grant", "job", k, "from_pool", s.Nomad.Pool())
	case stepHold:
		err := p.cfg.Nomad.Hold(ctx, s.Nomad, s.Record.Held.ID)
		if errors.Is(err, nomad.ErrJobChanged) {
			return nil // the next round reads the new version and holds that
		}
		if err != nil {
			return err
		}
		p.log.Info("held: the job waits in Nomad with nothing to place", "job", k, "from_pool", s.Nomad.Pool(), "why", s.Why)
	case stepTag:
		return p.cfg.Nomad.TagHeld(ctx, s.Nomad, s.Why)
	case stepUntag:
		return p.cfg.Nomad.UntagHeld(ctx, k)
	case stepPutRecord, stepPromote:
		rec, err := p.cfg.Store.PutRecord(ctx, *a.record(s.Record))
		if err != nil {
			return err
		}
		a.records[k] = rec
		if s.Kind == stepPromote {
			p.log.Info("promoted a starving job to the highest-priority queue", "job", k)
		}
	case stepDropRecord:
		return p.cfg.Store.DeleteRecord(ctx, k)
	case stepRenew:
		return p.cfg.Store.SetLeaseEnd(ctx, s.Lease)
	case stepLearn:
		p.stack().Caps.Observe(s.Lease.VC, s.Learn)
	case stepAuction:
		return p.putAuction(ctx, s.Auction)
	case stepCarriedOut:
		if p.carriedOut() || s.Learned {
			return p.saveState(ctx)
		}
	}
	return nil
}

// revoke marks a lease as taken back. When another planner marked it
// first, the suspension this round registers is still recorded before it
// happens, and the job's status shows that mark.
func (a *applier) revoke(ctx context.Context, s step) error {
	p, k := a.p, s.Job
	marked, err := p.cfg.Store.Revoke(ctx, s.Lease, s.Revoke)
	if err != nil {
		return err
	}
	if want := s.Revoke.Suspends; want != nil && (marked.Revoke.Suspends == nil || *marked.Revoke.Suspends != *want) {
		// Another planner marked it first: the suspension this round
		// registers is still recorded before it happens.
		rv := *marked.Revoke
		rv.Suspends = want
		marked.Revoke = &rv
		if marked, err = p.cfg.Store.SetVersions(ctx, marked); err != nil {
			return err
		}
	}
	a.leases[k] = &marked
	if st, ok := a.pl.status[k]; ok && st.State == "revoking" {
		// What the round added to the reason (a lost allocation's wait,
		// lost.go) stays.
		st.Reason = marked.Revoke.Reason + strings.TrimPrefix(st.Reason, s.Revoke.Reason)
		st.Deadline = marked.Revoke.Deadline
		a.pl.status[k] = st
	}
	p.log.Info("revoking", "job", k, "gpus", s.Lease.GPUs, "lease", s.Lease.LeaseID, "reason", marked.Revoke.Reason,
		"deadline", marked.Revoke.Deadline)
	return nil
}

// suspend re-registers a job with count 0; a job its user changed
// meanwhile is suspended by the next round, which reads the new version.
func (a *applier) suspend(ctx context.Context, s step) error {
	p, k := a.p, s.Job
	err := p.cfg.Nomad.Suspend(ctx, s.Nomad, s.Lease.LeaseID)
	switch {
	case errors.Is(err, nomad.ErrJobChanged):
		// The user changed the job meanwhile: the next round reads
		// the new version and suspends that.
	case err != nil:
		return err
	default:
		p.log.Info("suspended: Nomad stops the allocation with the job's grace period", "job", k, "lease", s.Lease.LeaseID)
	}
	return nil
}

// release deletes a lease's keys (with rec, when not nil, in the same
// transaction).
func (a *applier) release(ctx context.Context, l lease.JobLease, rec *lease.JobRecord, why string) error {
	if err := a.p.cfg.Store.Release(ctx, l, rec); err != nil {
		return err
	}
	k := leaseJob(l)
	a.leases[k] = nil
	if rec != nil {
		a.records[k] = *rec
	}
	a.p.log.Info("released", "job", l.Namespace+"/"+l.JobID, "gpus", l.GPUs, "lease", l.LeaseID, "why", why)
	return nil
}

// grant writes a lease, then pins its job to it: right away, or, with
// concurrent pins (Config.PinWorkers), in the background, settled when the
// run of grants it is in ends (finishPins). A job its user changed or
// removed meanwhile has the lease released again (the next round sees the
// new version); any other failure of the pin leaves the lease, which the
// next round pins again (the job's SubmitIndex still matches).
func (a *applier) grant(ctx context.Context, s step) error {
	p, k, l := a.p, s.Job, s.Lease
	if err := p.cfg.Store.Grant(ctx, l); err != nil {
		return err
	}
	a.leases[k] = &l
	if s.PoolErr != nil {
		return a.pinned(ctx, s, s.PoolErr)
	}
	if a.pins != nil {
		a.pins.start(ctx, p.cfg.Nomad, s)
		return nil
	}
	return a.pinned(ctx, s, p.cfg.Nomad.Pin(ctx, s.Nomad, l, s.Pool, s.Restarts))
}

// pinned settles a grant whose lease was written and whose pin returned
// err.
func (a *applier) pinned(ctx context.Context, s step, err error) error {
	p, k, l := a.p, s.Job, s.Lease
	switch {
	case errors.Is(err, nomad.ErrJobChanged):
		if rerr := a.release(ctx, l, nil, "job changed while being granted"); rerr != nil {
			return errors.Join(err, rerr)
		}
		a.pl.status[k] = lease.JobStatus{State: "queued", Reason: "changed while being granted"}
		a.pl.r.dropLease(k)
		return nil
	case err != nil:
		return err
	}
	p.log.Info("granted", "job", k, "node", l.NodeNames(), "gpus", l.GPUs, "lease", l.LeaseID, "restarts", s.Restarts)
	return nil
}

// keepStatuses leaves the status of every job whose planned status is
// untrue as it was.
func (a *applier) keepStatuses() {
	for k := range a.stale {
		if st, ok := a.p.statuses[k]; ok {
			a.pl.status[k] = st
		} else {
			delete(a.pl.status, k)
		}
	}
}

// settle makes the round's model (the View's) what the round left in
// Consul: a job with a step that did not happen has the lease, record and
// pending grant it had before the round, or this round wrote.
func (a *applier) settle() {
	r, w := a.pl.r, a.pl.r.world.store
	for k := range a.failed {
		restore(r.setLease, r.dropLease, w.leases, k)
		if l, ok := a.leases[k]; ok {
			if l == nil {
				r.dropLease(k)
			} else {
				r.setLease(k, *l)
			}
		}
		restore(r.setRecord, r.dropRecordOf, w.records, k)
		if rec, ok := a.records[k]; ok {
			r.setRecord(k, rec)
		}
		restore(r.setPending, r.dropPending, w.pending, k)
	}
}

// restore sets k to what was has for it, or drops it when was has none.
func restore[V any](set func(core.JobKey, V), drop func(core.JobKey), was map[core.JobKey]V, k core.JobKey) {
	if v, ok := was[k]; ok {
		set(k, v)
	} else {
		drop(k)
	}
}
