//go:build linux && cgo

package gpususpend

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

// The argument structs of cuda.h (CUDA 12.8 and later), each 64 bytes;
// reserved fields must be zero.
typedef struct { unsigned int timeoutMs; unsigned int reserved0; uint64_t reserved1[7]; } themisLockArgs;
typedef struct { uint64_t reserved[8]; } themisPlainArgs;
typedef struct { void *gpuPairs; unsigned int gpuPairsCount; char reserved[44]; uint64_t reserved1; } themisRestoreArgs;

static void *themisLib;
static int (*themisInit)(unsigned int);
static int (*themisDriverGetVersion)(int *);
static int (*themisGetErrorName)(int, const char **);
static int (*themisGetState)(int, int *);
static int (*themisLock)(int, themisLockArgs *);
static int (*themisCheckpoint)(int, themisPlainArgs *);
static int (*themisRestore)(int, themisRestoreArgs *);
static int (*themisUnlock)(int, themisPlainArgs *);

// themisOpen loads libcuda.so.1 and its symbols; it returns NULL, or what
// is missing. *initResult is cuInit's result.
static const char *themisOpen(int *initResult) {
	if (themisLib == NULL) {
		themisLib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		if (themisLib == NULL) {
			return dlerror();
		}
	}
#define THEMIS_SYM(var, name) \
	*(void **)(&var) = dlsym(themisLib, name); \
	if (var == NULL) return "libcuda.so.1 has no " name " (the CUDA process-checkpoint API needs driver 550 or later)";
	THEMIS_SYM(themisInit, "cuInit")
	THEMIS_SYM(themisDriverGetVersion, "cuDriverGetVersion")
	THEMIS_SYM(themisGetErrorName, "cuGetErrorName")
	THEMIS_SYM(themisGetState, "cuCheckpointProcessGetState")
	THEMIS_SYM(themisLock, "cuCheckpointProcessLock")
	THEMIS_SYM(themisCheckpoint, "cuCheckpointProcessCheckpoint")
	THEMIS_SYM(themisRestore, "cuCheckpointProcessRestore")
	THEMIS_SYM(themisUnlock, "cuCheckpointProcessUnlock")
#undef THEMIS_SYM
	*initResult = themisInit(0);
	return NULL;
}

static int themisVersion(int *v) { return themisDriverGetVersion(v); }

static const char *themisErrorName(int code) {
	const char *name = NULL;
	if (themisGetErrorName(code, &name) != 0) {
		return NULL;
	}
	return name;
}

static int themisState(int pid, int *state) { return themisGetState(pid, state); }

static int themisLockPid(int pid, unsigned int timeoutMs) {
	themisLockArgs args;
	memset(&args, 0, sizeof args);
	args.timeoutMs = timeoutMs;
	return themisLock(pid, &args);
}

static int themisCheckpointPid(int pid) {
	themisPlainArgs args;
	memset(&args, 0, sizeof args);
	return themisCheckpoint(pid, &args);
}

static int themisRestorePid(int pid) {
	themisRestoreArgs args;
	memset(&args, 0, sizeof args);
	return themisRestore(pid, &args);
}

static int themisUnlockPid(int pid) {
	themisPlainArgs args;
	memset(&args, 0, sizeof args);
	return themisUnlock(pid, &args);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Library is the CUDA driver's process-checkpoint API in libcuda.so.1.
type Library struct {
	driverVersion int
}

var (
	openOnce sync.Once
	opened   *Library
	openErr  error
)

// Open loads libcuda.so.1 (once per process) and initialises the driver
// API. It fails, saying why, where there is no NVIDIA driver or it is too
// old for the process-checkpoint API.
func Open() (*Library, error) {
	openOnce.Do(func() {
		var initResult C.int
		if why := C.themisOpen(&initResult); why != nil {
			openErr = fmt.Errorf("CUDA process checkpoints are not available: %s", C.GoString(why))
			return
		}
		if initResult != 0 {
			openErr = fmt.Errorf("CUDA process checkpoints are not available: %w", callError("cuInit", 0, initResult))
			return
		}
		var v C.int
		if r := C.themisVersion(&v); r != 0 {
			openErr = callError("cuDriverGetVersion", 0, r)
			return
		}
		opened = &Library{driverVersion: int(v)}
	})
	return opened, openErr
}

// DriverVersion is the CUDA version the driver supports, as cuDriverGetVersion
// writes it (13000 for 13.0).
func (l *Library) DriverVersion() int { return l.driverVersion }

func callError(call string, pid int, r C.int) error {
	e := &Error{Call: call, PID: pid, Code: int(r)}
	if name := C.themisErrorName(r); name != nil {
		e.Name = C.GoString(name)
	}
	return e
}

func checkPID(pid int) error {
	if pid <= 0 {
		return errors.New("gpususpend: pid must be positive")
	}
	return nil
}

// State returns the process's checkpoint state.
func (l *Library) State(pid int) (State, error) {
	if err := checkPID(pid); err != nil {
		return 0, err
	}
	var s C.int
	if r := C.themisState(C.int(pid), &s); r != 0 {
		return 0, callError("cuCheckpointProcessGetState", pid, r)
	}
	return State(s), nil
}

// Lock implements API.
func (l *Library) Lock(pid int, timeout time.Duration) error {
	if err := checkPID(pid); err != nil {
		return err
	}
	ms := timeout.Milliseconds()
	if ms < 0 || ms > 1<<32-1 {
		return fmt.Errorf("gpususpend: lock timeout %s out of range", timeout)
	}
	if r := C.themisLockPid(C.int(pid), C.uint(ms)); r != 0 {
		return callError("cuCheckpointProcessLock", pid, r)
	}
	return nil
}

// Checkpoint implements API.
func (l *Library) Checkpoint(pid int) error {
	if err := checkPID(pid); err != nil {
		return err
	}
	if r := C.themisCheckpointPid(C.int(pid)); r != 0 {
		return callError("cuCheckpointProcessCheckpoint", pid, r)
	}
	return nil
}

// Restore implements API.
func (l *Library) Restore(pid int) error {
	if err := checkPID(pid); err != nil {
		return err
	}
	if r := C.themisRestorePid(C.int(pid)); r != 0 {
		return callError("cuCheckpointProcessRestore", pid, r)
	}
	return nil
}

// Unlock implements API.
func (l *Library) Unlock(pid int) error {
	if err := checkPID(pid); err != nil {
		return err
	}
	if r := C.themisUnlockPid(C.int(pid)); r != 0 {
		return callError("cuCheckpointProcessUnlock", pid, r)
	}
	return nil
}
