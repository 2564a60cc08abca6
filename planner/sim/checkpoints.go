package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// Periodic checkpoints (knob sim.checkpoint_every, Config.CheckpointEvery).
//
// With 0 (the default) a preempted job checkpoints when told, within its
// grace period or for sim.checkpoint_s, and loses nothing: today's model.
// With E > 0 a job completes a checkpoint every E seconds of its own
// productive execution (restore time does not count), and a preempted job
// resumes from its newest one: the work since then is lost and done again.
// The costs of a preemption (grace period, sim.checkpoint_s,
// sim.restore_s) are unchanged, so that runs with and without periodic
// checkpoints differ only in the work lost. Taking a periodic checkpoint
// costs no time.
//
// Phases: a job's first checkpoint comes after firstCheckpoint(E, seq)
// seconds of execution, in (0, E], offset by its arrival order (seq, the
// trace order) along the golden-ratio sequence, so that jobs that start in
// one round (after a burst of arrivals or completions) do not checkpoint
// together, and a job started on arrival is not aligned to the clock
// either; after each resume the clock starts again from the checkpoint it
// resumed from (the next one after E seconds).
//
// The decision core sees the seconds since the newest checkpoint as
// Job.CheckpointAge; the run reports the GPU-seconds lost (Result.LostWork:
// seconds of execution lost x GPUs).

// KnobCheckpointEvery is the simulator's knob for periodic checkpoints.
const KnobCheckpointEvery = "sim.checkpoint_every"

// ParseCheckpointEvery reads a sim.checkpoint_every value: seconds ("600")
// or a duration ("10m"), finite and >= 0.
func ParseCheckpointEvery(v string) (float64, error) {
	s := strings.TrimSpace(v)
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d, derr := time.ParseDuration(s)
		if derr != nil {
			return 0, fmt.Errorf("%s = %q: want seconds or a duration (600, 10m)", KnobCheckpointEvery, v)
		}
		x = d.Seconds()
	}
	if !(x >= 0) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%s = %q: want a finite number of seconds >= 0", KnobCheckpointEvery, v)
	}
	return x, nil
}

// CheckpointEvery reads sim.checkpoint_every (default 0: no periodic
// checkpoints, nothing lost).
func CheckpointEvery(k core.Knobs) (float64, error) {
	if !k.Has(KnobCheckpointEvery) {
		return 0, nil
	}
	return ParseCheckpointEvery(k.String(KnobCheckpointEvery, ""))
}

// ckptClock is one job's periodic checkpoints.
type ckptClock struct {
	// since is the seconds of execution since the newest checkpoint (or
	// the job's start), work the same at full speed (what the job redoes);
	// next is the seconds of execution until the next checkpoint.
	since, work, next float64
}

// firstCheckpoint is the seconds of execution before the first periodic
// checkpoint of the job seq-th in arrival order: in (0, every], spread
// evenly by the golden ratio's fractional part.
func firstCheckpoint(every float64, seq uint64) float64 {
	const phi = 0.6180339887498949
	_, frac := math.Modf(float64(seq%(1<<40)) * phi)
	return every * (1 - frac)
}

// start begins the clock when the job is granted: the first time offset
// by its arrival order, after a preemption from the checkpoint it resumes
// from.
func (c *ckptClock) start(every float64, seq uint64, first bool) {
	c.since, c.work, c.next = 0, 0, every
	if first {
		c.next = firstCheckpoint(every, seq)
	}
}

// run accounts dt seconds of execution at speed (work per second).
func (c *ckptClock) run(every, dt, speed float64) {
	if dt < c.next {
		c.since += dt
		c.work += dt * speed
		c.next -= dt
		return
	}
	c.since = math.Mod(dt-c.next, every)
	c.work = c.since * speed
	c.next = every - c.since
}

// lose is what a preemption now costs: the seconds of execution and the
// work since the newest checkpoint.
func (c *ckptClock) lose() (seconds, work float64) {
	seconds, work = c.since, c.work
	c.since, c.work = 0, 0
	return seconds, work
}
