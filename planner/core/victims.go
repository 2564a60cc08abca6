package core

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Checkpoint-aware victims (issue #12, part 4). A preempted job resumes
// from its newest complete checkpoint, so it loses the work it did since
// then: Job.LostWork. Where a policy has a choice among victims, the
// VictimOrder LeastLostWork makes it prefer the one that loses the least:
//
//   - FitGpp (Equation 2): among the BE jobs of least Score, ties (within
//     a relative 1e-9) go to the least lost work instead of FIFO order. The
//     P limit stays a hard limit: it bounds how often one BE job is sent
//     back to the queue, which costs it queueing and a restore whatever it
//     loses, so a job preempted P times is no candidate even at no loss.
//   - LRTP: among the BE jobs of equal remaining time (live, every
//     remaining time is unknown, so all of them), the least lost work.
//   - Preemptive policies with priority levels (Tiresias's queues,
//     Leveler): inside one level, the running jobs are ranked by lost work,
//     most first, in the places the level's running jobs held in the
//     policy's ranking; queued jobs keep their places. The budget then
//     keeps the running jobs that would lose the most and preempts the
//     others of the level.
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

// VictimsFromKnobs reads preempt.victims (default policy).
func VictimsFromKnobs(k Knobs) (VictimOrder, error) {
	if !k.Has(KnobVictims) {
		return VictimsByPolicy, nil
	}
	return ParseVictimOrder(k.String(KnobVictims, ""))
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

// keepMostLost reorders, inside each level of a ranking (ranked by level
// first, as a Leveler ranks), the running jobs that may be preempted by
// lost work, most first, in the slots such jobs held; queued jobs and
// running jobs still restoring (never preempted) keep their places. Ties
// keep the policy's order.
func keepMostLost(ranked []*Job, level func(*Job) int) {
	var slots []int
	var jobs []*Job
	flush := func() {
		if len(slots) > 1 {
			slices.SortStableFunc(jobs, func(a, b *Job) int {
				la, lb := a.LostWork(), b.LostWork()
				switch {
				case la > lb:
					return -1
				case la < lb:
					return 1
				}
				return 0
			})
			for k, i := range slots {
				ranked[i] = jobs[k]
			}
		}
		slots, jobs = slots[:0], jobs[:0]
	}
	cur := 0
	for i, j := range ranked {
		l := level(j)
		if i == 0 || l != cur {
			flush()
			cur = l
		}
		if j.Phase == Granted && j.RestoreLeft <= 0 {
			slots = append(slots, i)
			jobs = append(jobs, j)
		}
	}
	flush()
}

// scoreTie reports whether two scores are equal within a relative 1e-9
// (FitGpp's ties under LeastLostWork).
func scoreTie(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
