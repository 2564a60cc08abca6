//go:build !linux || !cgo

package gpususpend

import (
	"errors"
	"time"
)

// Library is the CUDA driver's process-checkpoint API; this build has none.
type Library struct{}

// Open fails: the API is reached through cgo on Linux.
func Open() (*Library, error) {
	return nil, errors.New("CUDA process checkpoints are not available: built without cgo or not on Linux")
}

// DriverVersion is 0 in this build.
func (l *Library) DriverVersion() int { return 0 }

var errNoLibrary = errors.New("gpususpend: no CUDA library in this build")

// State implements API.
func (l *Library) State(int) (State, error) { return 0, errNoLibrary }

// Lock implements API.
func (l *Library) Lock(int, time.Duration) error { return errNoLibrary }

// Checkpoint implements API.
func (l *Library) Checkpoint(int) error { return errNoLibrary }

// Restore implements API.
func (l *Library) Restore(int) error { return errNoLibrary }

// Unlock implements API.
func (l *Library) Unlock(int) error { return errNoLibrary }
