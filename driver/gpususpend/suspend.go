package gpususpend

import (
	"errors"
	"fmt"
	"time"
)

// SuspendTimes is how long each step of a suspend took.
type SuspendTimes struct {
	Lock       time.Duration // until the process's GPU work drained
	Checkpoint time.Duration // device memory to host, GPU released
}

// ResumeTimes is how long each step of a resume took.
type ResumeTimes struct {
	Restore time.Duration // GPU taken again, memory back on it
	Unlock  time.Duration
}

// Suspend locks the running CUDA process pid (waiting up to lockTimeout for
// its GPU work to drain) and checkpoints it, leaving its GPU free. If the
// checkpoint fails, the process is unlocked again, so it is either
// suspended or running as before (unless the unlock fails too: both errors
// are returned).
func Suspend(api API, pid int, lockTimeout time.Duration) (SuspendTimes, error) {
	var times SuspendTimes
	state, err := api.State(pid)
	if err != nil {
		return times, err
	}
	if state != Running {
		return times, fmt.Errorf("suspend pid %d: it is %s, not running", pid, state)
	}
	start := time.Now()
	if err := api.Lock(pid, lockTimeout); err != nil {
		return times, fmt.Errorf("suspend pid %d: %w", pid, err)
	}
	locked := time.Now()
	times.Lock = locked.Sub(start)
	if err := api.Checkpoint(pid); err != nil {
		err = fmt.Errorf("suspend pid %d: %w", pid, err)
		if uerr := api.Unlock(pid); uerr != nil {
			return times, errors.Join(err, fmt.Errorf("and unlocking it again: %w", uerr))
		}
		return times, err
	}
	times.Checkpoint = time.Since(locked)
	return times, nil
}

// Resume restores a suspended process pid onto its GPU and unlocks it; a
// process only locked (a suspend cut short) is just unlocked.
func Resume(api API, pid int) (ResumeTimes, error) {
	var times ResumeTimes
	state, err := api.State(pid)
	if err != nil {
		return times, err
	}
	switch state {
	case Checkpointed:
		start := time.Now()
		if err := api.Restore(pid); err != nil {
			return times, fmt.Errorf("resume pid %d: %w", pid, err)
		}
		times.Restore = time.Since(start)
	case Locked:
	default:
		return times, fmt.Errorf("resume pid %d: it is %s, not suspended", pid, state)
	}
	start := time.Now()
	if err := api.Unlock(pid); err != nil {
		return times, fmt.Errorf("resume pid %d: %w", pid, err)
	}
	times.Unlock = time.Since(start)
	return times, nil
}
