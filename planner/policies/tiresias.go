package policies

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// Tiresias is Discretized 2D-LAS or 2D-Gittins (Gu et al., NSDI'19, section
// 3): K priority queues on attained service in GPU-seconds (W_J x t_J), jobs
// demoted when they cross a queue's threshold, strict priority between
// queues, and inside a queue FIFO by first start time (2D-LAS) or by Gittins
// index over the queue's service quantum (2D-Gittins; FIFO in the last
// queue, where the quantum is infinite), a queue's running jobs ahead of
// its waiting ones (startKey). A job WAITING for PROMOTEKNOB times
// its execution time is promoted to the first queue, with both counters
// reset. Preemptive; placement consolidates jobs whose skew exceeds
// PACKLIMIT and spreads the rest.
//
// Knobs (--set): tiresias.queues (thresholds, default 3200s: K = 2 as in
// the paper's evaluation), tiresias.promote_knob (default inf: no
// promotion), tiresias.promote_every (default: promote each job exactly
// when due; a positive duration or seconds checks promotions only at
// multiples of it, so that thousands of waiting jobs do not each need a
// decision of their own), tiresias.pack_limit (default 1.0: consolidate
// any job that slows down when spread), tiresias.order (running, the
// default: a queue's running jobs first; start: by first start alone, as
// before issue #17), tiresias.gittins_dist (2D-Gittins: file of job
// GPU-time samples; the simulator loads it; without it the distribution
// is learned from finished jobs).
type Tiresias struct {
	gittins     bool
	Thresholds  []float64
	PromoteKnob float64
	// PromoteEvery, when positive, checks promotions only at multiples of
	// this many seconds (of the clock), instead of at each job's due time.
	PromoteEvery float64
	PackLimit    float64
	// StartOrder is the order inside a queue before this knob existed
	// (tiresias.order=start): by first start alone, so that a waiting job
	// that started earlier preempts a running one that started later.
	// The default (running) ranks a queue's running jobs first.
	StartOrder bool
	// DistPath is the job-size sample file for 2D-Gittins ("" = learn).
	DistPath string
	index    GittinsIndex
}

// GittinsIndex is a job-size distribution's Gittins index: the probability
// that a job with attained service a finishes within quantum delta, over its
// expected service in that quantum.
type GittinsIndex interface {
	Index(attained, delta float64) float64
}

// ObservationLog is a Learner that lists what it observed, so that a
// restarted planner learns the same (Tiresias's Stateful state).
type ObservationLog interface {
	core.Learner
	Observed() []float64
}

var _ core.Stateful = (*Tiresias)(nil)

// ExportState implements Stateful: the job sizes 2D-Gittins learned from
// finished jobs (nil when it learns nothing: 2D-LAS, or a fixed
// distribution).
func (t *Tiresias) ExportState() ([]byte, error) {
	l, ok := t.index.(ObservationLog)
	if !ok || !t.gittins {
		return nil, nil
	}
	return json.Marshal(l.Observed())
}

// ImportState implements Stateful: it observes the recorded sizes again,
// on top of the prior.
func (t *Tiresias) ImportState(b []byte) error {
	l, ok := t.index.(ObservationLog)
	if !ok || !t.gittins || b == nil {
		return nil
	}
	var sizes []float64
	if err := json.Unmarshal(b, &sizes); err != nil {
		return fmt.Errorf("tiresias-gittins state: %w", err)
	}
	if len(l.Observed()) > 0 {
		return fmt.Errorf("tiresias-gittins state: the policy has observed sizes already")
	}
	for _, s := range sizes {
		l.Observe(s)
	}
	return nil
}

// NewTiresias configures Tiresias from knobs.
func NewTiresias(gittins bool, k core.Knobs) (*Tiresias, error) {
	t := &Tiresias{gittins: gittins}
	var err error
	if t.Thresholds, err = k.Seconds("tiresias.queues", []float64{3200}); err != nil {
		return nil, err
	}
	if t.PromoteKnob, err = k.Float("tiresias.promote_knob", math.Inf(1)); err != nil {
		return nil, err
	}
	every, err := k.Seconds("tiresias.promote_every", []float64{0})
	if err != nil {
		return nil, err
	}
	if len(every) != 1 {
		return nil, fmt.Errorf("tiresias.promote_every = %q: want one duration", k.String("tiresias.promote_every", ""))
	}
	t.PromoteEvery = every[0]
	if t.PackLimit, err = k.Float("tiresias.pack_limit", 1.0); err != nil {
		return nil, err
	}
	switch o := k.String("tiresias.order", "running"); o {
	case "running":
	case "start":
		t.StartOrder = true
	default:
		return nil, fmt.Errorf("tiresias.order = %q: want start or running", o)
	}
	if gittins {
		t.DistPath = k.String("tiresias.gittins_dist", "")
	}
	return t, nil
}

// SetIndex gives 2D-Gittins its job-size distribution.
func (t *Tiresias) SetIndex(g GittinsIndex) { t.index = g }

// Index is the distribution in use (nil until set).
func (t *Tiresias) Index() GittinsIndex { return t.index }

// Observe feeds a finished job's size to a learning distribution.
func (t *Tiresias) Observe(gpuSeconds float64) {
	if l, ok := t.index.(core.Learner); ok {
		l.Observe(gpuSeconds)
	}
}

func (t *Tiresias) Name() string {
	if t.gittins {
		return "tiresias-gittins"
	}
	return "tiresias-las"
}

func (t *Tiresias) Preemptive() bool { return true }

// Capabilities implements Policy: Tiresias promotes, re-ranks as jobs cross
// its queues' thresholds, ranks by queue level, learns job sizes
// (2D-Gittins without a distribution) and keeps them as its state.
func (t *Tiresias) Capabilities() core.Capabilities {
	return core.Capabilities{Policy: t, Promoter: t, Rechecker: t, Steady: t, Learner: t, Leveler: t, State: t}
}
func (t *Tiresias) Blocking() bool { return false }

// Consolidate packs placement-sensitive jobs (skew above PACKLIMIT).
func (t *Tiresias) Consolidate(j *core.Job) bool { return j.Skew > t.PackLimit }

// Level is a job's queue: 0 is the highest priority.
func (t *Tiresias) Level(j *core.Job) int {
	a := j.AttainedSinceReset()
	for i, q := range t.Thresholds { // few thresholds, ascending
		if a < q {
			return i
		}
	}
	return len(t.Thresholds)
}

// quantum is the service quantum of a queue for the Gittins index: the
// queue's upper threshold (Tiresias, section 3.2: "for jobs in Q_i, Delta_i
// equals Q_i^hi"; the authors' simulator uses the same fixed value), and
// infinite in the last queue, where jobs run FIFO.
func (t *Tiresias) quantum(level int) float64 {
	if level >= len(t.Thresholds) {
		return math.Inf(1)
	}
	return t.Thresholds[level]
}

// toDemotion is the service a job has left before it is demoted.
func (t *Tiresias) toDemotion(j *core.Job, level int) float64 {
	return t.Thresholds[level] - j.AttainedSinceReset()
}

// Rank implements Policy.
func (t *Tiresias) Rank(_ time.Time, jobs []*core.Job) {
	r := newRankRecs(jobs)
	if !t.records(r, true) {
		core.SortFIFO(jobs)
		t.records(r, false)
	}
	r.sort()
}

// records sets the rank records of r's jobs; with check it stops, false,
// at the first job out of FIFO order.
func (t *Tiresias) records(r *rankKeys, check bool) bool {
	for i, j := range r.jobs {
		if check && i > 0 && !core.FIFOOrdered(r.jobs[i-1], j) {
			return false
		}
		l := t.Level(j)
		if t.gittins && t.index != nil && l < len(t.Thresholds) {
			// Higher index first: negate so that smaller keys rank first.
			r.set(i, l, -t.index.Index(j.AttainedSinceReset(), t.quantum(l)), t.startKey(j))
			continue
		}
		// Without an index, a queue's running jobs go first by a level of
		// their own (2l, the waiting ones 2l+1): the same order as
		// startKey's, bucketed rather than sorted, and each bucket nearly
		// in order already (rankKeys.sort).
		level := 2 * l
		if !t.StartOrder && j.Phase != core.Granted {
			level++
		}
		start := math.Inf(1)
		if j.Started {
			start = float64(j.FirstStart.UnixNano())
		}
		r.set(i, level, 0, start)
	}
	return true
}

// startKey orders a queue's jobs (after the Gittins index, for
// 2D-Gittins): its running jobs first, then the waiting jobs that ran
// before, each by first start time, then the jobs never started, in
// submission order (core.CompareFIFO breaks the ties). A running job is thus
// never preempted for a waiting one of its own queue: FIFO by start time
// is there to avoid "unnecessary preemptions" (Tiresias, section 3.2),
// and the authors' simulator keeps each queue's running jobs ahead of its
// waiting ones after every pass. Ordering by first start alone
// (tiresias.order=start) let a job that started earlier, was preempted by
// a higher queue and fell behind, take the GPUs back from the jobs of its
// queue that started later: the job with the most attained service first,
// the opposite of LAS (TestTiresiasRunningFirst works an example).
func (t *Tiresias) startKey(j *core.Job) float64 {
	if !j.Started {
		return math.Inf(1)
	}
	// Seconds, so that the running jobs' offset keeps microseconds.
	at := float64(j.FirstStart.UnixNano()) / 1e9
	if j.Phase == core.Granted && !t.StartOrder {
		at -= runningFirst
	}
	return at
}

// runningFirst is more seconds than any clock reads (year 30,000).
const runningFirst = 1e12

// Promote implements Promoter: queued jobs below the first queue that have
// waited PROMOTEKNOB times their execution time.
func (t *Tiresias) Promote(_ time.Time, jobs []*core.Job) []core.JobKey {
	if math.IsInf(t.PromoteKnob, 1) {
		return nil
	}
	var out []core.JobKey
	for _, j := range jobs {
		if j.Phase == core.Queued && t.Level(j) > 0 && j.Waited >= t.PromoteKnob*j.Executed {
			out = append(out, j.Key)
		}
	}
	return out
}

// SteadyUntil implements core.Steady: the ranking changes only when a
// running job crosses its queue's threshold or a waiting job becomes due
// for promotion (NextChange); inside a queue jobs keep their order, and
// least-lost-work's order of running jobs by lost work changes which job
// is preempted, never whether. Unlike the simulator's model, a live job
// gains service while it restores (its allocation runs), so the restore
// time is not added. 2D-Gittins ranks inside a queue by an index of each
// job's attained service, which moves with time: also until a running
// job's index meets a waiting one's of its queue (gittinsUntil); an index
// that cannot say how it moves (no Stretch) stands only now.
func (t *Tiresias) SteadyUntil(now time.Time, jobs []*core.Job) time.Time {
	next := t.nextChange(now, jobs, false)
	if !t.gittins || t.index == nil {
		return next // ranked as 2D-LAS (records)
	}
	ix, ok := t.index.(stretcher)
	if !ok {
		return now
	}
	return t.gittinsUntil(now, jobs, ix, next)
}

// NextChange implements RecheckAfter: the next time a running job crosses
// its queue's threshold, or a waiting job becomes due for promotion.
func (t *Tiresias) NextChange(now time.Time, jobs []*core.Job) time.Time {
	return t.nextChange(now, jobs, true)
}

// nextChange is NextChange, with the running jobs' service resuming only
// once they restored (restoring) or at once.
func (t *Tiresias) nextChange(now time.Time, jobs []*core.Job, restoring bool) time.Time {
	next, promo := math.Inf(1), math.Inf(1)
	for _, j := range jobs {
		switch j.Phase {
		case core.Granted:
			if l := t.Level(j); l < len(t.Thresholds) && j.GPUs > 0 {
				if restoring {
					// Service resumes once the job has restored.
					next = min(next, j.RestoreLeft+t.toDemotion(j, l)/float64(j.GPUs))
				} else {
					// Live (SteadyUntil): service grows at once, at its
					// rate (a gang's parts are summed).
					next = min(next, t.toDemotion(j, l)/j.ServiceRate())
				}
			}
		case core.Queued:
			if !math.IsInf(t.PromoteKnob, 1) && t.Level(j) > 0 {
				promo = min(promo, t.PromoteKnob*j.Executed-j.Waited)
			}
		}
	}
	if !math.IsInf(promo, 1) && t.PromoteEvery > 0 {
		// The first multiple of PromoteEvery (on the clock) at or after
		// the earliest due time: every job due by then is promoted at once.
		at := float64(now.UnixNano())/1e9 + math.Max(promo, 1e-3)
		promo = math.Ceil(at/t.PromoteEvery)*t.PromoteEvery - float64(now.UnixNano())/1e9
	}
	next = math.Min(next, promo)
	if math.IsInf(next, 1) {
		return time.Time{}
	}
	return now.Add(time.Duration(math.Max(next, 1e-3) * float64(time.Second)))
}
