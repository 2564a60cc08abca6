package policies

import (
	"fmt"
	"math"
	"math/rand"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// FitGpp is Fitting Grace Period Preemption (Yabuuchi et al., OpML'19):
// FIFO, except that a trial-and-error (TE) job that does not fit preempts
// best-effort (BE) jobs, one at a time, each the BE job that minimises
//
//	Score(j) = |D_j| / max |D| + s x GP_j / max GP          (Equation 1)
//
// among those whose node would then fit the TE job and that were preempted
// fewer than P times (Equation 2). D_j is the job's demand vector (GPUs, CPU,
// memory) relative to its node's capacity, |.| the Euclidean norm, GP the
// grace period, the maxima over all running BE jobs. A TE job that no single
// preemption lets fit preempts nothing and waits (live, a TE gang split over
// several nodes may preempt several BE jobs instead: fitgpp_gang.go). Preempted BE jobs return to
// the head of the queue; TE jobs rank ahead of BE jobs, so that they start
// as soon as room is made. The queue blocks at its head, as FIFO does.
//
// Knobs: fitgpp.s (default 4.0), fitgpp.max_preemptions (P, default 1).
// Under preempt.victims=least-lost-work (the Scheduler's Victims) ties of
// Score go to the BE job that loses the least work; P stays a hard limit
// (victims.go).
type FitGpp struct {
	S              float64
	MaxPreemptions int
}

// NewFitGpp configures FitGpp from knobs.
func NewFitGpp(k core.Knobs) (*FitGpp, error) {
	f := &FitGpp{}
	var err error
	if f.S, err = k.Float("fitgpp.s", 4.0); err != nil {
		return nil, err
	}
	if f.MaxPreemptions, err = k.Int("fitgpp.max_preemptions", 1); err != nil {
		return nil, err
	}
	if f.S < 0 || f.MaxPreemptions < 0 {
		return nil, fmt.Errorf("fitgpp.s and fitgpp.max_preemptions must not be negative")
	}
	return f, nil
}

func (*FitGpp) Name() string                     { return "fitgpp" }
func (*FitGpp) Rank(_ time.Time, js []*core.Job) { rankTEFirst(js) }
func (*FitGpp) Preemptive() bool                 { return false }
func (*FitGpp) Blocking() bool                   { return true }
func (*FitGpp) Consolidate(*core.Job) bool       { return true }
func (*FitGpp) MakesRoom(j *core.Job) bool       { return j.Class == core.ClassTrialAndError }

// Capabilities implements Policy: FitGpp makes room, one victim or a set,
// and its decision stands until something changes (Steady).
func (f *FitGpp) Capabilities() core.Capabilities {
	return core.Capabilities{Policy: f, RoomMaker: f, GangRoom: f, Steady: f}
}

// SteadyUntil implements core.Steady: never by time alone. The queue's
// order (class, preempted, arrival) and Equation 2's scores (shares and
// grace periods) do not move with time; lost work only breaks ties
// between victims (which one, never whether), and a resumed job's
// restore guard ending is the planner's own deadline.
func (*FitGpp) SteadyUntil(time.Time, []*core.Job) time.Time { return time.Time{} }

// Victim implements Preemptor (Equation 2).
func (f *FitGpp) Victim(j *core.Job, running []*core.Job, room *core.Room) *core.Job {
	return f.pick(running, room, func(v *core.Job) bool { return room.FitsWith(j, v) })
}

// pick is the BE job of running that minimises Score among those preempted
// fewer than P times for which ok holds, or nil. The maxima of Score are
// over all running BE jobs.
func (f *FitGpp) pick(running []*core.Job, room *core.Room, ok func(*core.Job) bool) *core.Job {
	maxNorm, maxGP := 0.0, 0.0
	for _, v := range running {
		if v.Class == core.ClassBestEffort {
			maxNorm = math.Max(maxNorm, norm(room.Share(v)))
			maxGP = math.Max(maxGP, v.GracePeriod)
		}
	}
	var best *core.Job
	bestScore := math.Inf(1)
	for _, v := range running {
		if v.Class != core.ClassBestEffort || v.Preemptions >= f.MaxPreemptions || !ok(v) {
			continue
		}
		score := 0.0
		if maxNorm > 0 {
			score += norm(room.Share(v)) / maxNorm
		}
		if maxGP > 0 {
			score += f.S * v.GracePeriod / maxGP
		}
		switch {
		case room.LeastLostWork() && best != nil && room.Tie(score, bestScore):
			// Ties: the least lost work, then FIFO order.
			if v.LostWork() < best.LostWork() {
				best, bestScore = v, score
			}
		case score < bestScore: // ties: the first in FIFO order
			best, bestScore = v, score
		}
	}
	return best
}

func norm(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// LRTP is Longest Remaining Time Preemption (Big-C, the FitGpp paper's
// baseline): like FitGpp, but a TE job that does not fit preempts the
// running BE job with the longest remaining time (perfect knowledge), then
// the next, until it fits; no preemption limit. Ties go to the first in
// FIFO order, or under LeastLostWork to the least lost work.
type LRTP struct{}

func (LRTP) Name() string                     { return "lrtp" }
func (LRTP) Rank(_ time.Time, js []*core.Job) { rankTEFirst(js) }
func (LRTP) Preemptive() bool                 { return false }
func (LRTP) Blocking() bool                   { return true }
func (LRTP) Consolidate(*core.Job) bool       { return true }
func (LRTP) MakesRoom(j *core.Job) bool       { return j.Class == core.ClassTrialAndError }
func (p LRTP) Capabilities() core.Capabilities {
	return core.Capabilities{Policy: p, RoomMaker: p, Steady: p}
}

// SteadyUntil implements core.Steady: never by time alone, as FitGpp's
// (remaining time and lost work choose which victim, never whether).
func (LRTP) SteadyUntil(time.Time, []*core.Job) time.Time { return time.Time{} }

// Victim implements Preemptor.
func (LRTP) Victim(_ *core.Job, running []*core.Job, room *core.Room) *core.Job {
	least := room != nil && room.LeastLostWork()
	var best *core.Job
	for _, v := range running {
		if v.Class != core.ClassBestEffort {
			continue
		}
		switch {
		case best == nil:
			best = v
		case least && room.Tie(remaining(v), remaining(best)):
			if v.LostWork() < best.LostWork() {
				best = v
			}
		case remaining(v) > remaining(best):
			best = v
		}
	}
	return best
}

// RandomPreempt is the FitGpp paper's RAND baseline: a TE job that does not
// fit preempts running BE jobs chosen at random until it fits.
type RandomPreempt struct{ rng *rand.Rand }

// NewRandomPreempt returns RAND seeded with 1; Seed reseeds it.
func NewRandomPreempt() *RandomPreempt { return &RandomPreempt{rng: rand.New(rand.NewSource(1))} }

// Seed makes the victims a function of the run's seed.
func (r *RandomPreempt) Seed(seed int64) { r.rng = rand.New(rand.NewSource(seed)) }

func (*RandomPreempt) Name() string                     { return "rand" }
func (*RandomPreempt) Rank(_ time.Time, js []*core.Job) { rankTEFirst(js) }
func (*RandomPreempt) Preemptive() bool                 { return false }
func (*RandomPreempt) Blocking() bool                   { return true }
func (*RandomPreempt) Consolidate(*core.Job) bool       { return true }
func (*RandomPreempt) MakesRoom(j *core.Job) bool       { return j.Class == core.ClassTrialAndError }

// Capabilities implements Policy: rand makes room, drawing its victims,
// and its decision stands until something changes (Steady).
func (r *RandomPreempt) Capabilities() core.Capabilities {
	return core.Capabilities{Policy: r, RoomMaker: r, Seeder: r, Steady: r}
}

// SteadyUntil implements core.Steady: never by time alone, as LRTP's,
// even while a trial-and-error job waits. Its queue's order (class,
// preempted, arrival) does not move with time, and whether a round draws
// does not depend on the random stream: Victim draws only when a
// best-effort job runs, and a job it draws is preempted in that round
// (room.go), which writes the lease's revocation and so moves the
// planner's change mark: the round after a round that drew always runs.
// A round that drew nothing, decided again on the same inputs, draws
// nothing again, and leaves the stream where it was; skipping it leaves
// every later draw the same (TestSkipEquivalence checks both with
// trial-and-error jobs waiting).
func (r *RandomPreempt) SteadyUntil(time.Time, []*core.Job) time.Time { return time.Time{} }

// Victim implements Preemptor.
func (r *RandomPreempt) Victim(_ *core.Job, running []*core.Job, _ *core.Room) *core.Job {
	n := 0
	for _, v := range running {
		if v.Class == core.ClassBestEffort {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	k := r.rng.Intn(n)
	for _, v := range running {
		if v.Class == core.ClassBestEffort {
			if k == 0 {
				return v
			}
			k--
		}
	}
	return nil
}

// rankTEFirst is FitGpp's queue: TE jobs, then preempted BE jobs (back at
// the head of the queue), then the rest, each in FIFO order.
func rankTEFirst(jobs []*core.Job) {
	r := newRankKeys(jobs)
	for i, j := range r.jobs {
		switch {
		case j.Class == core.ClassTrialAndError:
			r.level[i] = 0
		case j.Preemptions > 0:
			r.level[i] = 1
		default:
			r.level[i] = 2
		}
	}
	r.sort()
}
