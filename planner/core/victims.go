package core

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Checkpoint-aware victims (issue #12, part 4). A preempted job resumes
// from its newest complete checkpoint, so it loses the work it did since
// then: Job.LostWork. Where a policy has a choice among victims, the
// VictimOrder LeastLostWork makes it prefer the one that loses the least:
//
//   - FitGpp (Equation 2): among the BE jobs of least Score, ties (within
//     a relative 1e-9, or preempt.tie) go to the least lost work instead of
//     FIFO order. The
//     P limit stays a hard limit: it bounds how often one BE job is sent
//     back to the queue, which costs it queueing and a restore whatever it
//     loses, so a job preempted P times is no candidate even at no loss.
//   - LRTP: among the BE jobs of equal remaining time (within preempt.tie;
//     live, every remaining time is unknown, so all of them), the least
//     lost work.
//   - Preemptive policies with priority levels (Tiresias's queues,
//     Leveler): inside one level, the running jobs are ranked first, by
//     lost work, most first, then the level's queued jobs in the policy's
//     order (keepMostLost says why). The budget then keeps the running jobs
//     that would lose the most and preempts the others of the level.
//   - HiveD's opportunistic jobs (planner/hived, Cluster.SetVictimCost):
//     a guaranteed job's cells bind where the opportunistic jobs they evict
//     lose the least.
//
// RAND keeps its uniform choice: it is the uninformed baseline.

// VictimOrder says how a scheduler chooses among victims it may preempt.
type VictimOrder int

const (
	// VictimsByPolicy leaves the choice to each policy's own rule (the
	// papers' behaviour; the default).
	VictimsByPolicy VictimOrder = iota
	// LeastLostWork prefers, where the policy has a choice, the victim
	// that loses the fewest GPU-seconds of work (Job.LostWork).
	LeastLostWork
)

// KnobVictims is the knob that sets a run's VictimOrder:
// preempt.victims=policy (default) or least-lost-work.
const KnobVictims = "preempt.victims"

var victimOrderNames = []string{"policy", "least-lost-work"}

func (o VictimOrder) String() string {
	if int(o) >= 0 && int(o) < len(victimOrderNames) {
		return victimOrderNames[o]
	}
	return fmt.Sprintf("VictimOrder(%d)", int(o))
}

// ParseVictimOrder reads a VictimOrder's name (as String writes it).
func ParseVictimOrder(s string) (VictimOrder, error) {
	if i := slices.Index(victimOrderNames, strings.TrimSpace(s)); i >= 0 {
		return VictimOrder(i), nil
	}
	return 0, fmt.Errorf("%s = %q: want one of %s", KnobVictims, s, strings.Join(victimOrderNames, ", "))
}

// LostWork is the GPU-seconds of work j would lose if it were preempted
// now: CheckpointAge x GPUs, where an unknown age (negative) counts all of
// the job's execution the core knows of (Executed: since it arrived or was
// last promoted), as a job that never completed a checkpoint restarts
// from scratch.
func (j *Job) LostWork() float64 {
	age := j.CheckpointAge
	if age < 0 || math.IsNaN(age) {
		age = j.Executed
	}
	return age * float64(j.GPUs)
}

// Leveler is implemented by preemptive policies whose ranking puts jobs in
// priority levels (Tiresias's queues, 0 the highest) and orders them inside
// a level by a rule of their own: the jobs of one level are of equal
// priority, and LeastLostWork may reorder its running jobs.
type Leveler interface {
	Level(j *Job) int
}

// keepMostLost reorders each level of a ranking (ranked by level first,
// as a Leveler ranks): the level's running jobs first, by lost work, most
// first (ties in the policy's order), then its queued jobs in the policy's
// order. The budget then keeps, inside the level that must give GPUs up,
// the running jobs that would lose the most.
//
// Running jobs go before the level's queued jobs so that the choice is
// stable: a victim chosen for its small loss is queued behind the running
// jobs it was preempted for, rather than ranked ahead of them by the
// policy's own order (Tiresias: an earlier first start) and started again
// at once in place of another (measured on a Philly slice: 5.5 times the
// preemptions). The price: inside one level a queued job no longer
// preempts a running one; it starts when GPUs free up, when running jobs
// are demoted below it, or when it is promoted.
func keepMostLost(ranked []*Job, level func(*Job) int) {
	run := keepPool.Get().(*[2][]*Job)
	defer func() {
		clear(run[0])
		clear(run[1])
		run[0], run[1] = run[0][:0], run[1][:0]
		keepPool.Put(run)
	}()
	begin := 0
	flush := func(end int) {
		if len(run[0]) > 1 {
			slices.SortStableFunc(run[0], func(a, b *Job) int {
				la, lb := a.LostWork(), b.LostWork()
				switch {
				case la > lb:
					return -1
				case la < lb:
					return 1
				}
				return 0
			})
		}
		if len(run[0]) > 0 {
			copy(ranked[begin:], run[0])
			copy(ranked[begin+len(run[0]):end], run[1])
		}
		run[0], run[1] = run[0][:0], run[1][:0]
		begin = end
	}
	cur := 0
	for i, j := range ranked {
		if l := level(j); i == 0 || l != cur {
			flush(i)
			cur = l
		}
		if j.Phase == Granted {
			run[0] = append(run[0], j)
		} else {
			run[1] = append(run[1], j)
		}
	}
	flush(len(ranked))
}

// keepPool recycles keepMostLost's buffers (a simulation ranks thousands
// of jobs per round).
var keepPool = sync.Pool{New: func() any { return new([2][]*Job) }}

// KnobVictimTie is the knob that widens the ties LeastLostWork breaks:
// preempt.tie=R counts two victims' scores as equal when they differ by at
// most R times the larger (FitGpp's Score, LRTP's remaining time); default
// 0, equal within 1e-9. The papers' rules never tie on continuous inputs
// (the simulator's workloads), where R > 0 lets lost work decide among
// nearly equal victims.
const KnobVictimTie = "preempt.tie"

// VictimsFromKnobs reads preempt.victims (default policy) and preempt.tie
// (default 0; only with least-lost-work).
func VictimsFromKnobs(k Knobs) (VictimOrder, float64, error) {
	order := VictimsByPolicy
	if k.Has(KnobVictims) {
		var err error
		if order, err = ParseVictimOrder(k.String(KnobVictims, "")); err != nil {
			return 0, 0, err
		}
	}
	tie, err := k.Float(KnobVictimTie, 0)
	switch {
	case err != nil:
		return 0, 0, err
	case !(tie >= 0 && tie < 1):
		return 0, 0, fmt.Errorf("%s = %q: want a fraction in [0, 1)", KnobVictimTie, k.String(KnobVictimTie, ""))
	case tie > 0 && order != LeastLostWork:
		return 0, 0, fmt.Errorf("%s = %q: ties are broken by lost work only under %s=%s", KnobVictimTie, k.String(KnobVictimTie, ""), KnobVictims, LeastLostWork)
	}
	return order, tie, nil
}

// victimTie reports whether two victims' scores are equal: within tie
// times the larger, or 1e-9 (a and b >= 0, or both infinite).
func victimTie(a, b, tie float64) bool {
	if a == b {
		return true
	}
	d := math.Abs(a - b)
	return d <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b))) || d <= tie*math.Max(math.Abs(a), math.Abs(b))
}
