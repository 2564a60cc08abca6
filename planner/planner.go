// Package planner runs the themis planner: it watches Nomad, rebuilds the
// cluster's state from Nomad and Consul on every change, asks the decision
// core (package core) what to do, and carries out its actions through the
// Consul and Nomad adapters.
//
// Every round starts from what Nomad and Consul say, never from memory, so a
// planner that crashes or restarts loses nothing: leases and job records live
// in Consul, pins live in the jobs, and the next round picks up where the
// last one stopped.
//
// A round is read -> reconcile -> apply (docs/design.md, "Read,
// reconcile, apply"):
//
//	read       Nomad snapshot (jobs, nodes, allocations) + Consul (leases,
//	           job records, pending grants, drivers' records) -> world
//	           (world.go); nothing is written
//	reconcile  pure: a model of the world after each planned step; leases
//	           being taken back are driven on (the job suspended, the lease
//	           released once Nomad reports its allocation terminal, with
//	           its service recorded in the same transaction), stale leases
//	           and pending grants dropped, each job classified (observe.go);
//	           core.Scheduler.Decide on the state the model gives; its
//	           releases, promotions, preemptions (revoke), grants (lease +
//	           pin) and pending grants (act.go) -> a plan of typed steps
//	           (plan.go). A job that cannot be read, or whose records do not
//	           decode, is set aside alone (setaside.go)
//	apply      the only writer (apply.go): the steps in order; a step that
//	           fails skips the later steps of its job and the grants of the
//	           GPUs it was to free, and the round returns the errors joined
package planner

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-uuid"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// Cluster is what the planner needs of Nomad (*nomad.Client).
type Cluster interface {
	EnsurePendingPool(ctx context.Context) error
	PendingPool() string
	Snapshot(ctx context.Context) (*nomad.Snapshot, error)
	Watch(ctx context.Context, index uint64, poke func()) (uint64, error)
	Pin(ctx context.Context, j *nomad.Job, l lease.JobLease, pool string, restarts int) error
	Suspend(ctx context.Context, j *nomad.Job, leaseID string) error
	Adopt(ctx context.Context, j *nomad.Job) error
	// Hold, TagHeld and UntagHeld hold a waiting job with nothing to
	// place and keep it from Nomad's garbage collection (hold.go).
	Hold(ctx context.Context, j *nomad.Job, holdID string) error
	TagHeld(ctx context.Context, j *nomad.Job, description string) error
	UntagHeld(ctx context.Context, k core.JobKey) error
}

// Store is what the planner keeps in Consul (*consul.Store). A listing
// returns what it could use with a *consul.UnreadableError naming the keys
// it could not (those jobs are set aside: setaside.go).
type Store interface {
	Leases(ctx context.Context) (map[core.JobKey]lease.JobLease, error)
	Grant(ctx context.Context, l lease.JobLease) error
	Revoke(ctx context.Context, l lease.JobLease, r lease.Revoke) (lease.JobLease, error)
	// SetVersions records on a lease the job versions the planner
	// registers under it (own.go).
	SetVersions(ctx context.Context, l lease.JobLease) (lease.JobLease, error)
	Release(ctx context.Context, l lease.JobLease, rec *lease.JobRecord) error
	Records(ctx context.Context) (map[core.JobKey]lease.JobRecord, error)
	PutRecord(ctx context.Context, r lease.JobRecord) (lease.JobRecord, error)
	DeleteRecord(ctx context.Context, k core.JobKey) error
	Checkpoints(ctx context.Context) (map[core.JobKey]lease.CheckpointRecord, error)
	Progress(ctx context.Context) (map[core.JobKey]lease.ProgressRecord, error)
	Pending(ctx context.Context) (map[core.JobKey]lease.Pending, error)
	// GPULeases lists the GPU keys, read when a job lease cannot be used.
	GPULeases(ctx context.Context) (map[string]lease.GPULease, error)
	PutPending(ctx context.Context, pg lease.Pending) error
	DeletePending(ctx context.Context, k core.JobKey) error
	PolicyState(ctx context.Context, name string) ([]byte, error)
	PutPolicyState(ctx context.Context, name string, state []byte) error
	SetLeaseEnd(ctx context.Context, l lease.JobLease) error
	PutAuction(ctx context.Context, report []byte) error
	Statuses(ctx context.Context) ([]lease.JobStatus, error)
	// WriteStatuses writes puts and deletes dels (status records, in
	// Consul transactions); it returns how many of them, puts first, were
	// committed (all when the error is nil).
	WriteStatuses(ctx context.Context, puts []lease.JobStatus, dels []core.JobKey) (int, error)
}

// Config wires a planner.
type Config struct {
	Nomad Cluster
	Store Store
	// Stack is what decides (planner/stack: the policy, its choice among
	// victims, virtual clusters), built as the simulator builds it.
	Stack *stack.Stack
	// Resync is how often a full round runs even without events.
	Resync time.Duration
	// MaxKillTimeout is the Nomad clients' max_kill_timeout: Nomad cuts a
	// task's kill_timeout (the grace period the planner pins) to it, so a
	// job asking for a longer grace period is rejected rather than
	// silently cut. 0 means no limit is known.
	MaxKillTimeout time.Duration
	// RestoreGuard is how long a job resumed after a preemption runs
	// before it may be preempted again (the live counterpart of the
	// simulator's restore time): every resume makes progress.
	RestoreGuard time.Duration
	// GangPlaceTimeout is how long Nomad may take to place every part of
	// a multi-node gang (or a one-node job's allocation) after its grant
	// before the planner takes the lease back (DefaultGangPlaceTimeout
	// when 0; gang.go).
	GangPlaceTimeout time.Duration
	// StopOnClientAfter is the disconnect.stop_on_client_after the Nomad
	// adapter's pins set (nomad.Client.SetStopOnClientAfter; the same
	// value), from which the lost bound is counted (lost.go);
	// nomad.DefaultStopOnClientAfter when 0.
	StopOnClientAfter time.Duration
	Log               hclog.Logger
	// OnRoundTime, when set, is told how long each round of Run took and
	// what it returned (load tests record round latency with it).
	OnRoundTime func(took time.Duration, err error)
	// Now is the clock; the decision core itself never reads one.
	Now func() time.Time
	// PinWorkers is how many Nomad pins of a run of consecutive grants
	// run at once, after the run's lease transactions committed in plan
	// order (apply.go); 0 or 1 pins each job right after its lease. The
	// zero value keeps the old way for the tests that build a Config;
	// `themis planner` and `themis dev` run ConcurrentPinWorkers
	// (-pin-workers): under a stream of arrivals concurrent pins halved
	// each job's mean submit -> running, although in one burst alone its
	// jobs ran later, Nomad's scheduler being the queue there
	// (docs/scale.md, "A burst of grants", "The scale run").
	// SetPinWorkers changes it on a running planner.
	PinWorkers int
	// DecideEveryRound turns off skipping the rounds where nothing
	// changed (steady.go): every round reads everything and decides (the
	// benchmarks of a round's own work; an escape hatch).
	DecideEveryRound bool
	// OnRound, when set, is called at the end of every round with what
	// the round left (View), from the planner's goroutine: it must not
	// block for long. The HTTP API (planner/httpapi) serves it.
	OnRound func(View)
}

// Planner is the live planner loop.
type Planner struct {
	cfg      Config
	log      hclog.Logger
	statuses map[core.JobKey]lease.JobStatus
	// recheck is when the policy's ranking next changes with time alone
	// (core.RecheckAfter; zero: never): Run decides again then.
	recheck time.Time
	// st is the stack in force (Config.Stack, or the last SetStack).
	st atomic.Pointer[stack.Stack]
	// stateOf is the stack whose policy's recorded state was imported
	// (core.Stateful; policystate.go), and saved the state last written.
	stateOf *stack.Stack
	saved   []byte
	// auctionRound is the last auction round recorded (policystate.go).
	auctionRound uint64
	// events are the current round's grants, revokes and releases, for
	// OnRound (view.go).
	events events
	// badKeys are the keys of the last round that could not be used, with
	// their errors, so each is logged once (setaside.go).
	badKeys map[string]string
	// newLeaseID names a new lease (a random UUID).
	newLeaseID func() (string, error)
	// pinWorkers is Config.PinWorkers, or SetPinWorkers's.
	pinWorkers atomic.Int32
	// steady is what the last round left for skipping the next (nil: the
	// next round runs); skipped counts the rounds skipped.
	steady  *steady
	skipped atomic.Int64
	// cells are the virtual clusters' cells, built once for the nodes
	// (vcs.go).
	cells      cellCache
	everyRound atomic.Bool // Config.DecideEveryRound, or SetDecideEveryRound's
}

// SetDecideEveryRound turns skipping unchanged rounds off (on: every round
// decides) or on again, from the next round on (Config.DecideEveryRound),
// for measurements that compare the two on one planner.
func (p *Planner) SetDecideEveryRound(on bool) { p.everyRound.Store(on) }

// Skipped is how many rounds ended early because nothing had changed
// (steady.go).
func (p *Planner) Skipped() int64 { return p.skipped.Load() }

// ConcurrentPinWorkers is the PinWorkers of `themis planner` unless told
// otherwise, and the one TestGrantBurst compares with one pin at a time.
const ConcurrentPinWorkers = 8

// SetPinWorkers sets how many pins of a run of grants run at once from the
// next round on (Config.PinWorkers; 0 or 1: one after another), for load
// tests that compare the two ways on one planner.
func (p *Planner) SetPinWorkers(n int) {
	p.pinWorkers.Store(int32(max(n, 1)))
}

// stack is the decision stack in force.
func (p *Planner) stack() *stack.Stack { return p.st.Load() }

// SetStack replaces the decision stack from the next round on (a reloaded
// VC config): running jobs keep their leases, and the replay of their
// leases binds them to the new virtual clusters' cells where they still
// fit; one that no longer fits keeps its GPUs as an opportunistic job.
// Safe to call while Run runs.
func (p *Planner) SetStack(s *stack.Stack) { p.st.Store(s) }

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
	p := &Planner{cfg: cfg, log: cfg.Log, newLeaseID: uuid.GenerateUUID}
	p.st.Store(cfg.Stack)
	p.SetPinWorkers(cfg.PinWorkers)
	p.SetDecideEveryRound(cfg.DecideEveryRound)
	if cfg.OnRound != nil {
		p.cfg.Store = recorder{Store: cfg.Store, p: p}
	}
	return p
}

// roundTimeout bounds one round: a Nomad or Consul call that hangs fails the
// round (logged, retried a second later) instead of stalling the planner.
const roundTimeout = 30 * time.Second

// Run reconciles on every Nomad event batch and every Resync until ctx ends.
func (p *Planner) Run(ctx context.Context) error {
	if err := p.cfg.Nomad.EnsurePendingPool(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
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
	recheck := time.NewTimer(time.Hour)
	defer recheck.Stop()
	trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poke:
		case <-tick.C:
		case <-recheck.C:
		}
		rctx, cancel := context.WithTimeout(ctx, roundTimeout)
		began := time.Now()
		err := p.Reconcile(rctx)
		cancel()
		if p.cfg.OnRoundTime != nil {
			p.cfg.OnRoundTime(time.Since(began), err)
		}
		if err != nil && ctx.Err() == nil {
			p.log.Error("reconcile failed; retrying on the next event or resync", "error", err)
			time.AfterFunc(time.Second, trigger)
		}
		if !p.recheck.IsZero() {
			// A little after the change, so the round sees it.
			recheck.Reset(max(0, time.Until(p.recheck)) + 100*time.Millisecond)
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
