// Package sim is the trace-driven discrete-event simulator. It replays a
// trace against a simulated cluster through the same decision core as the
// live planner (package core): at every arrival, completion and policy
// recheck it builds the core's State, calls Planner.Decide, and applies the
// actions with modelled costs. Jobs run at a speed set by their placement
// (see models.go) and pay a checkpoint/restore cost when resumed after a
// preemption.
package sim

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/models"
	"github.com/themis-nomad/themis/planner/trace"
)

// Config is one simulation run.
type Config struct {
	Trace   *trace.Trace
	Cluster *cluster.Cluster
	Policy  core.Policy
	Seed    int64
	// Settings are recorded in the result (the knobs the run used).
	Settings []string
	// CheckpointCost and RestoreCost (seconds) are charged to a preempted
	// job when it resumes: it holds its new GPUs without progress for their
	// sum. (The GPUs of a preempted job are free at once; the checkpoint's
	// hold on them is not modelled.)
	CheckpointCost, RestoreCost float64
	// StartCost (seconds) is charged to every start, first or resumed: the
	// job holds its GPUs without progress that long (the live system's
	// grant-to-running latency: the planner's round, Nomad's placement,
	// the driver's start). 0 in the papers' models.
	StartCost float64
	// EqualParts places gangs as the live planner does (core.Scheduler's
	// EqualParts: one node, or equal parts on whole nodes), for comparing
	// the simulator with the live system.
	EqualParts bool
	// UnknownUntilRun hides a job's remaining time and work from the
	// policy (core.Job.Remaining -1, Work 0) until it has run, as live,
	// where they come from the workload's progress reports and the rate
	// the driver measures once the job runs (docs/themis.md, the 3-app
	// scenario). Off in the papers' models: every job's is known.
	UnknownUntilRun bool
	// Progress, if set, is called with the number of jobs finished or
	// started so far and the total, at most once per 1% of progress.
	Progress func(done, total int)
	// OneRack models every node as in one rack for the placement
	// slowdown: a job across nodes pays the cross-node factor, never the
	// cross-rack one (RunVCs sets it; see there).
	OneRack bool
	// Peer runs the Tiresias simulator's model (sim.semantics=tiresias):
	// every job runs at full speed wherever it is placed. The caller also
	// sets zero costs and a peer policy (NewPolicy does).
	Peer bool
	// Placer, if set, places jobs in virtual clusters (see RunVCs): the
	// core's Planner.Placer, told of every job that finishes or is
	// preempted. The policy must not be preemptive.
	Placer core.Placer
	// Overflow lets jobs that do not fit their VC run outside it as the
	// Placer's Overflow places them (core.Scheduler.Overflow).
	Overflow bool
	// CheckpointEvery, when positive, is the seconds of execution between
	// a job's periodic checkpoints: a preempted job loses the work since
	// its newest one (checkpoints.go). 0: it loses nothing.
	CheckpointEvery float64
	// Victims and VictimTie are the decision core's choice among victims
	// (knobs preempt.victims and preempt.tie).
	Victims   core.VictimOrder
	VictimTie float64
}

// job is the simulator's record of one trace job.
type job struct {
	tj trace.Job
	// c is the core's view of the job: while the job is active it points
	// into state.cj, which is handed to Decide as State.Jobs without a copy.
	c         *core.Job
	remaining float64 // seconds of work left at full speed
	overhead  float64 // seconds without progress left (restore after preemption)
	speed     float64
	grant     core.Grant
	running   bool
	start     float64
	end       float64
	queued    float64 // seconds waited before waitSince
	waitSince float64 // when the job last began to wait (while not running)
	// readyAt is when a preempted job has finished suspending (its grace
	// period) and could start again; preemptedAt when it was preempted.
	readyAt, preemptedAt float64
	finished             bool
	class                models.Class
	// released is when the job became visible to the policy: its Submit,
	// or for a later successive-halving phase when its app's previous
	// phase finished (see gate).
	released float64
	// runSec and slowSec are the productive seconds the job ran and their
	// sum weighted by the placement slowdown (JobResult.Placement).
	runSec, slowSec float64
	// ckpt is the job's periodic checkpoints; lost the GPU-seconds of work
	// its preemptions lost (checkpoints.go).
	ckpt ckptClock
	lost float64
	// slot is the job's index in state.cj (and active) while it is
	// active; kept is the round that last kept it in running.
	slot int
	kept int
}

var epoch = time.Unix(0, 0).UTC()

func at(t float64) time.Time { return epoch.Add(time.Duration(t * float64(time.Second))) }

// Run simulates the trace and returns what happened to every job.
func Run(cfg Config) (*Result, error) {
	if cfg.Trace == nil || cfg.Cluster == nil || cfg.Policy == nil {
		return nil, errors.New("sim: trace, cluster and policy are required")
	}
	wall := time.Now()
	nodes := cfg.Cluster.Nodes
	gpuNode := map[string]int{}
	for i, n := range nodes {
		for _, g := range n.GPUs {
			gpuNode[g.ID] = i
		}
	}
	for _, tj := range cfg.Trace.Jobs {
		// A trace read from a file is checked by its parser; a generated or
		// transformed one is checked here.
		switch {
		case !(tj.Submit >= 0) || math.IsInf(tj.Submit, 0):
			return nil, fmt.Errorf("sim: job %q: submit time %v s: want a finite number >= 0", tj.ID, tj.Submit)
		case !(tj.Duration >= 0) || math.IsInf(tj.Duration, 0):
			return nil, fmt.Errorf("sim: job %q: duration %v s: want a finite number >= 0", tj.ID, tj.Duration)
		}
	}
	if !(cfg.CheckpointEvery >= 0) || math.IsInf(cfg.CheckpointEvery, 0) {
		return nil, fmt.Errorf("sim: %s = %v: want a finite number of seconds >= 0", KnobCheckpointEvery, cfg.CheckpointEvery)
	}
	jobs := make([]*job, len(cfg.Trace.Jobs))
	lastPhase := map[string]int{}
	for _, tj := range cfg.Trace.Jobs {
		if tj.App != "" {
			lastPhase[tj.App] = max(lastPhase[tj.App], tj.Phase)
		}
	}
	for i, tj := range cfg.Trace.Jobs {
		model := tj.Model
		if model == "" {
			model = assignModel(modelRNG(cfg.Seed, tj.ID))
		}
		tj.Model = model
		cls := models.Of(model)
		class := tj.Class
		if class == "" {
			class = core.ClassBestEffort
		}
		jobs[i] = &job{
			tj: tj, remaining: tj.Duration, class: cls, start: -1, released: tj.Submit,
			c: &core.Job{
				Key: core.JobKey{Namespace: "sim", ID: tj.ID}, GPUs: tj.GPUs, VC: tj.VC, Class: class,
				Submitted: at(tj.Submit), Seq: uint64(i), Phase: core.Queued, Remaining: tj.Duration, Work: tj.Duration, Skew: cls.CrossNode,
				CrossRack: cls.CrossRack, CPU: tj.CPUs, Memory: tj.MemoryGB, GracePeriod: tj.GracePeriod,
				App: tj.App, Attained: tj.Attained, Executed: tj.Executed,
			},
		}
		if cfg.UnknownUntilRun {
			jobs[i].c.Remaining, jobs[i].c.Work = -1, 0
		}
		if tj.App != "" && tj.Phase > 0 {
			jobs[i].c.LaterPhases = lastPhase[tj.App] - tj.Phase
		}
	}
	caps := cfg.Policy.Capabilities()
	if reflect.TypeOf(caps.Policy) != reflect.TypeOf(cfg.Policy) {
		// A wrapper that embeds a policy and does not state its own
		// capabilities would be bypassed: the scheduler would call the
		// embedded policy's.
		return nil, fmt.Errorf("sim: policy %s (%T) states the capabilities of a %T: a policy that embeds another must state its own", cfg.Policy.Name(), cfg.Policy, caps.Policy)
	}
	if caps.Seeder != nil {
		caps.Seeder.Seed(cfg.Seed)
	}
	var vcs *vcCounter
	costs := cfg.Placer
	if cfg.Placer != nil {
		vcs = &vcCounter{Placer: cfg.Placer, queued: map[string]int{}}
		cfg.Placer = vcs
	}
	s := &state{cfg: cfg, caps: caps, vcs: vcs, nodes: nodes, gpuNode: gpuNode, planner: core.Scheduler{Policy: cfg.Policy, Victims: cfg.Victims, VictimTie: cfg.VictimTie, EqualParts: cfg.EqualParts},
		index: core.NewClusterIndex(nodes), gpuFreeAt: map[string]float64{}}
	s.free = s.index.Free(nil)
	if vcs != nil {
		s.planner.Placer = vcs // not a nil *vcCounter in an interface
		s.planner.Overflow = cfg.Overflow
	}
	s.byKey = make(map[core.JobKey]*job, len(jobs))
	for _, j := range jobs {
		if _, dup := s.byKey[j.c.Key]; dup {
			return nil, fmt.Errorf("sim: trace %s has two jobs with ID %q", cfg.Trace.Name, j.tj.ID)
		}
		s.byKey[j.c.Key] = j
	}
	if costs != nil && cfg.Victims == core.LeastLostWork {
		// HiveD's victims: the jobs' lost work as the core sees it.
		costs.SetVictimCost(func(k core.JobKey) float64 {
			if j := s.byKey[k]; j != nil {
				return j.c.LostWork()
			}
			return 0
		})
	}
	s.gate = newGate(cfg.Trace.Jobs)
	if err := s.loop(jobs); err != nil {
		return nil, err
	}
	if f := caps.Failer; f != nil && f.Err() != nil {
		return nil, fmt.Errorf("sim: policy %s: %w", cfg.Policy.Name(), f.Err())
	}
	res := &Result{
		Policy: cfg.Policy.Name(), Trace: cfg.Trace.Name, Cluster: cfg.Cluster.Name, Seed: cfg.Seed,
		TotalGPUs: cfg.Cluster.TotalGPUs(), Settings: cfg.Settings, Util: s.util, Preemptions: s.preemptions,
		Restarts: s.restarts, CheckpointEvery: cfg.CheckpointEvery, LostWork: s.lostWork,
	}
	first := math.Inf(1)
	last := 0.0
	for _, j := range jobs {
		jr := JobResult{ID: j.tj.ID, VC: j.tj.VC, Model: j.tj.Model, Class: j.c.Class, GPUs: j.tj.GPUs, Submit: j.released,
			Start: j.start, End: j.end, Duration: j.tj.Duration, Queue: j.queued, Preemptions: j.c.Preemptions,
			Started: j.start >= 0, Finished: j.finished, App: j.tj.App, Phase: j.tj.Phase, LostWork: j.lost}
		if j.runSec > 0 {
			jr.Placement = j.slowSec / j.runSec
		}
		if !jr.Started {
			jr.Start = 0
		}
		first = math.Min(first, j.tj.Submit)
		if j.finished {
			last = math.Max(last, j.end)
		}
		res.Jobs = append(res.Jobs, jr)
	}
	if len(jobs) > 0 && last > first {
		res.Makespan = last - first
	}
	res.Apps = appResults(jobs, res.TotalGPUs)
	res.WallSeconds = time.Since(wall).Seconds()
	return res, nil
}

type state struct {
	cfg Config
	// caps is the policy's capabilities, resolved once a run.
	caps    core.Capabilities
	nodes   []core.Node
	gpuNode map[string]int
	planner core.Scheduler
	index   *core.ClusterIndex
	// grants and slots are the running jobs' grants and their slots in
	// cj, kept beside running (in its order) for State.Grants and
	// GrantJobs.
	grants []core.Grant
	slots  []int
	// free is the GPUs no running job holds (State.Free), kept as jobs
	// start, finish and are preempted.
	free    *core.FreeGPUs
	round   int
	byKey   map[core.JobKey]*job // every job of the trace, built once
	decided bool
	now     float64
	// active is the arrived jobs in arrival order, queued and running,
	// and finished ones until the next compaction; the core's view of
	// active[i] is cj[i], whose capacity is the trace's length so that
	// arrivals never move it. A finished job's slot says Finished, which
	// Decide skips.
	active  []*job
	cj      []core.Job
	ptrs    []*core.Job
	dead    int    // finished jobs still in active
	running []*job // the running jobs, a small subset of active
	// gpuFreeAt is when a GPU held by a job suspending in its grace
	// period becomes free; a job granted it starts no earlier.
	gpuFreeAt   map[string]float64
	restarts    []float64
	vcs         *vcCounter // with a Placer: the VCs with queued jobs
	busy        int
	util        []UtilSample
	preemptions int
	// lostWork is the GPU-seconds of work preemptions lost (periodic
	// checkpoints only).
	lostWork float64
	done     int
	gate     *gate
}

func (s *state) loop(jobs []*job) error {
	if len(jobs) == 0 {
		return nil
	}
	next := 0
	s.now = jobs[0].tj.Submit
	total := len(jobs)
	lastReport := -1
	recheck := s.caps.Rechecker
	const eps = 1e-9
	preemptive := s.cfg.Policy.Preemptive()
	// A policy that preempts to make room (FitGpp) lets the jobs that may
	// do so pass a blocked head and preempt on a full cluster: their
	// arrivals always count.
	roomMaker := s.caps.RoomMaker
	// With a Placer a queue blocks per virtual cluster: an arrival in
	// another VC may start behind a blocked head.
	blocking := s.cfg.Policy.Blocking() && s.cfg.Placer == nil
	capacity := s.index.Capacity()
	// blocked: after the last decision a job that could fit the cluster
	// still waits; with a blocking policy nothing that arrives later can
	// start before it.
	blocked := false
	s.cj = make([]core.Job, 0, len(jobs))
	for {
		// Completions.
		completed := false
		arrived, mayMakeRoom := false, false
		kept := 0 // running[:kept] (and grants, slots) are the jobs still running
		for i, j := range s.running {
			// A job whose end is no later than now in floating point
			// (a remainder of 1e-10 s at a clock of 1e7 s) is done too:
			// the clock could not advance to it.
			if j.remaining <= eps && j.overhead <= eps || s.now+j.overhead+j.remaining/j.speed <= s.now {
				completed = true
				j.c.Phase = core.Finished // its slot in cj, until compaction
				final := *j.c
				j.c = &final
				j.running, j.finished, j.end = false, true, s.now
				s.busy -= j.tj.GPUs
				s.free.Give(j.grant)
				s.done++
				s.dead++
				if s.cfg.Placer != nil {
					s.cfg.Placer.Release(j.c.Key)
				}
				s.caps.Observe(j.c.VC, j.tj.Duration*float64(j.tj.GPUs))
				s.gate.finish(j)
				continue
			}
			if kept != i {
				s.running[kept], s.grants[kept], s.slots[kept] = j, s.grants[i], s.slots[i]
			}
			kept++
		}
		clear(s.running[kept:])
		clear(s.grants[kept:])
		s.running, s.grants, s.slots = s.running[:kept], s.grants[:kept], s.slots[:kept]
		if s.dead > 64 && 2*s.dead > len(s.active) {
			s.compact()
		}
		// Arrivals: the trace's, and the later phases whose previous
		// phase just finished.
		add := func(j *job, gated bool) {
			if gated {
				j.released = s.now
				j.c.Submitted = at(s.now)
			}
			s.cj = append(s.cj, *j.c)
			j.slot = len(s.cj) - 1
			j.c = &s.cj[j.slot]
			j.waitSince = s.now
			s.active = append(s.active, j)
			s.ptrs = append(s.ptrs, j.c)
			if s.vcs != nil {
				s.vcs.add(j.c.VC, 1)
			}
			arrived = true
			if roomMaker != nil && roomMaker.MakesRoom(j.c) {
				mayMakeRoom = true
			}
		}
		for _, j := range s.gate.open() {
			add(j, true)
		}
		for next < len(jobs) && jobs[next].tj.Submit <= s.now+eps {
			j := jobs[next]
			next++
			if s.gate.hold(j) {
				continue
			}
			add(j, false)
		}
		if len(s.active) == s.dead && next == len(jobs) && s.gate.held == 0 {
			break
		}
		// A non-preemptive policy's decision can only change when GPUs
		// were freed or a job arrived; an arrival cannot start when no GPU
		// is free (but see full), nor behind a blocked head, unless it may preempt for
		// room (FitGpp's TE jobs). Skipping those rounds gives the same
		// result, much faster on long queues.
		// With overflow a full cluster may hold opportunistic jobs that an
		// arrival's guaranteed job evicts: arrivals always count.
		full := s.busy == capacity && !s.cfg.Overflow
		skip := !preemptive && !completed && !mayMakeRoom && s.decided &&
			(!arrived || full || (blocking && blocked))
		if !skip {
			if err := s.decide(); err != nil {
				return err
			}
			s.decided = true
			blocked = false
			// Only skip reads blocked, and never for a preemptive policy.
			for _, j := range s.active {
				if preemptive || !j.running && !j.finished && j.tj.GPUs <= capacity {
					blocked = !preemptive
					break
				}
			}
		}
		s.sample()
		if s.cfg.Progress != nil {
			if pct := s.done * 100 / total; pct != lastReport {
				lastReport = pct
				s.cfg.Progress(s.done, total)
			}
		}
		// Next event.
		t := math.Inf(1)
		if next < len(jobs) {
			t = jobs[next].tj.Submit
		}
		for _, j := range s.running {
			t = min(t, s.now+j.overhead+j.remaining/j.speed) // builtin min: math.Min's result, inlined
		}
		if recheck != nil {
			if nc := recheck.NextChange(at(s.now), s.ptrs); !nc.IsZero() {
				t = min(t, nc.Sub(epoch).Seconds())
			}
		}
		if math.IsInf(t, 1) {
			break // what is left can never run (larger than the cluster)
		}
		s.advance(max(t, s.now))
	}
	for _, j := range s.active {
		if !j.running && !j.finished {
			j.queued += s.now - j.waitSince
		}
	}
	if s.cfg.Progress != nil {
		s.cfg.Progress(s.done, total)
	}
	return nil
}

// compact drops the finished jobs from active and cj, and points every
// active job's core view at its new slot.
func (s *state) compact() {
	n := 0
	for i, j := range s.active {
		if j.finished {
			continue
		}
		s.cj[n] = s.cj[i]
		s.active[n] = j
		n++
	}
	clear(s.active[n:])
	s.active, s.cj = s.active[:n], s.cj[:n]
	s.ptrs = s.ptrs[:0]
	for i, j := range s.active {
		j.c, j.slot = &s.cj[i], i
		s.ptrs = append(s.ptrs, j.c)
	}
	for i, j := range s.running {
		s.slots[i] = j.slot
	}
	s.dead = 0
}

// advance moves time forward, accounting service and waiting.
func (s *state) advance(to float64) {
	dt := to - s.now
	if dt <= 0 {
		return
	}
	for i := range s.cj {
		if c := &s.cj[i]; c.Phase == core.Queued {
			c.Waited += dt
		}
	}
	for _, j := range s.running {
		work := dt
		if j.overhead > 0 {
			o := min(j.overhead, work)
			j.overhead -= o
			work -= o
		}
		// Service counts productive time only: a job restoring from a
		// checkpoint has not yet run, so it is not demoted for it (which
		// could otherwise cycle promote-restore-demote forever).
		j.remaining = max(0, j.remaining-work*j.speed)
		j.runSec += work
		j.slowSec += work / j.speed
		if !s.cfg.UnknownUntilRun || j.runSec > 0 {
			j.c.Remaining, j.c.Work = j.remaining, j.tj.Duration
		}
		j.c.RestoreLeft = j.overhead
		j.c.Executed += work
		j.c.Attained += work * float64(j.tj.GPUs)
		if every := s.cfg.CheckpointEvery; every > 0 && work > 0 {
			j.ckpt.run(every, work, j.speed)
			j.c.CheckpointAge = j.ckpt.since
		}
	}
	s.now = to
}

// decide runs the decision core on the current state and applies its
// actions.
func (s *state) decide() error {
	// The running jobs' grants are kept beside running: the simulator
	// decides hundreds of thousands of times. Every job of the trace has
	// its own key, so the core may match the grants to the jobs by their
	// slots (State.GrantJobs).
	st := core.State{Nodes: s.nodes, Index: s.index, Jobs: s.cj, Grants: s.grants, GrantJobs: s.slots, Free: s.free}
	byKey := s.byKey
	d := s.planner.Decide(st, at(s.now))
	preempted := false
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.ReleaseAction:
			return fmt.Errorf("sim: core released %v, which the simulator had not finished", a.Grant)
		case core.PromoteAction:
			j := byKey[a.Job]
			j.c.Executed, j.c.Waited = 0, 0
		case core.PreemptAction:
			j := byKey[a.Grant.Job]
			j.running = false
			j.waitSince = s.now
			j.preemptedAt = s.now
			if s.vcs != nil {
				s.vcs.Release(a.Grant.Job)
				s.vcs.add(j.c.VC, 1)
			}
			j.c.Phase = core.Queued
			j.c.Preemptions++
			if s.cfg.CheckpointEvery > 0 {
				// It resumes from its newest periodic checkpoint.
				sec, work := j.ckpt.lose()
				j.remaining += work
				j.c.Remaining = j.remaining
				j.c.CheckpointAge = 0
				lost := sec * float64(j.tj.GPUs)
				j.lost += lost
				s.lostWork += lost
			}
			// A job with a grace period checkpoints during it, holding
			// its GPUs; one without pays the checkpoint when it resumes.
			j.overhead = s.cfg.CheckpointCost + s.cfg.RestoreCost
			if gp := j.c.GracePeriod; gp > 0 {
				j.overhead = s.cfg.RestoreCost
				j.readyAt = s.now + gp
				for _, id := range a.Grant.GPUs {
					s.gpuFreeAt[id] = s.now + gp
				}
			}
			s.busy -= j.tj.GPUs
			s.free.Give(a.Grant)
			s.preemptions++
			preempted = true
		case core.GrantAction:
			j := byKey[a.Grant.Job]
			j.running = true
			if s.vcs != nil {
				s.vcs.add(j.c.VC, -1)
			}
			// It starts once the GPUs' previous holders have suspended,
			// and it has itself: that wait is queueing.
			hold := math.Max(0, j.readyAt-s.now)
			for _, id := range a.Grant.GPUs {
				if t, ok := s.gpuFreeAt[id]; ok {
					if t > s.now {
						hold = math.Max(hold, t-s.now)
					} else {
						delete(s.gpuFreeAt, id)
					}
				}
			}
			j.queued += s.now - j.waitSince + hold
			j.overhead += hold
			s.running = append(s.running, j)
			s.grants, s.slots = append(s.grants, a.Grant), append(s.slots, j.slot)
			j.grant = a.Grant
			s.free.TakeGrant(a.Grant)
			j.c.Phase = core.Granted
			if every := s.cfg.CheckpointEvery; every > 0 {
				j.ckpt.start(every, j.c.Seq, !j.c.Started)
				j.c.CheckpointAge = 0
			}
			if !j.c.Started {
				j.c.Started, j.c.FirstStart = true, at(s.now)
				j.start = s.now + hold
			}
			if j.c.Preemptions > 0 {
				s.restarts = append(s.restarts, s.now+hold-j.preemptedAt)
			}
			j.speed = 1 / s.slowdown(j)
			j.overhead += s.cfg.StartCost
			j.c.RestoreLeft = j.overhead
			s.busy += j.tj.GPUs
		}
	}
	if preempted {
		// A job preempted and granted again in one round (an Allocator
		// moving it) is in running twice: keep it once.
		// Its grant is its newest (j.grant).
		s.round++
		kept := s.running[:0]
		keptGrants, keptSlots := s.grants[:0], s.slots[:0]
		for _, j := range s.running {
			if j.running && j.kept != s.round {
				j.kept = s.round
				kept = append(kept, j)
				keptGrants, keptSlots = append(keptGrants, j.grant), append(keptSlots, j.slot)
			}
		}
		clear(s.running[len(kept):])
		clear(s.grants[len(keptGrants):])
		s.running, s.grants, s.slots = kept, keptGrants, keptSlots
	}
	return nil
}

// slowdown is the job's placement penalty at its grant's spread
// (core.Job.Slowdown, with the job's class's factors as Skew and
// CrossRack); 1 under the peer's semantics.
func (s *state) slowdown(j *job) float64 {
	if s.cfg.Peer {
		return 1
	}
	first := -1
	sameNode, sameRack := true, true
	for _, id := range j.grant.GPUs {
		n := s.gpuNode[id]
		if first < 0 {
			first = n
			continue
		}
		if n != first {
			sameNode = false
			if !s.cfg.OneRack && s.nodes[n].Rack != s.nodes[first].Rack {
				sameRack = false
			}
		}
	}
	switch {
	case sameNode:
		return j.c.Slowdown(core.OneNode)
	case sameRack:
		return j.c.Slowdown(core.OneRack)
	default:
		return j.c.Slowdown(core.Racks)
	}
}

func (s *state) sample() {
	if n := len(s.util); n > 0 && s.util[n-1].Busy == s.busy {
		return
	}
	if n := len(s.util); n > 0 && s.util[n-1].T == s.now {
		s.util[n-1].Busy = s.busy
		return
	}
	s.util = append(s.util, UtilSample{T: s.now, Busy: s.busy})
}
