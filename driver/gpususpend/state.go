package gpususpend

import (
	"fmt"
	"time"
)

// State is a CUDA process's checkpoint state (CUprocessState).
type State int

// The states, with CUDA's values.
const (
	Running      State = 0
	Locked       State = 1
	Checkpointed State = 2
	Failed       State = 3
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Locked:
		return "locked"
	case Checkpointed:
		return "checkpointed"
	case Failed:
		return "failed"
	default:
		return fmt.Sprintf("state(%d)", int(s))
	}
}

// API is the process-checkpoint API of the CUDA driver; Library is the real
// one.
type API interface {
	State(pid int) (State, error)
	// Lock blocks the process's CUDA calls and waits up to timeout for
	// its submitted work to finish (0: no timeout).
	Lock(pid int, timeout time.Duration) error
	Checkpoint(pid int) error
	Restore(pid int) error
	Unlock(pid int) error
}

// Error is a failed call of the CUDA driver.
type Error struct {
	Call string // e.g. cuCheckpointProcessLock
	PID  int
	Code int    // CUresult
	Name string // e.g. CUDA_ERROR_NOT_READY, when the driver names it
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "CUDA error"
	}
	if e.PID == 0 {
		return fmt.Sprintf("%s: %s (code %d)", e.Call, name, e.Code)
	}
	return fmt.Sprintf("%s(pid %d): %s (code %d)", e.Call, e.PID, name, e.Code)
}
