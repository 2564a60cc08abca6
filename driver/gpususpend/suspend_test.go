package gpususpend

import (
	"strings"
	"testing"
	"time"
)

// fakeProcess plays the CUDA driver's side for one process: its state and
// the calls made, with an error to return from one call.
type fakeProcess struct {
	state State
	fail  string // the calls that fail, space separated
	calls []string
}

func (f *fakeProcess) call(name string) error {
	f.calls = append(f.calls, name)
	if strings.Contains(" "+f.fail+" ", " "+name+" ") {
		return &Error{Call: "cuCheckpointProcess" + name, PID: 7, Code: 600, Name: "CUDA_ERROR_NOT_READY"}
	}
	return nil
}

func (f *fakeProcess) State(int) (State, error) { return f.state, f.call("GetState") }

func (f *fakeProcess) Lock(_ int, timeout time.Duration) error {
	if err := f.call("Lock"); err != nil {
		return err
	}
	f.state = Locked
	return nil
}

func (f *fakeProcess) Checkpoint(int) error {
	if err := f.call("Checkpoint"); err != nil {
		return err
	}
	f.state = Checkpointed
	return nil
}

func (f *fakeProcess) Restore(int) error {
	if err := f.call("Restore"); err != nil {
		return err
	}
	f.state = Locked
	return nil
}

func (f *fakeProcess) Unlock(int) error {
	if err := f.call("Unlock"); err != nil {
		return err
	}
	f.state = Running
	return nil
}

// callCase is one case of Suspend or Resume on the fake: the process's
// state, the calls that fail, and the calls, state and error wanted.
type callCase struct {
	name      string
	state     State
	fail      string
	wantCalls string
	wantState State
	wantErr   string
}

// run runs each case through do, on a fresh fake.
func run(t *testing.T, cases []callCase, do func(API) error) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &fakeProcess{state: c.state, fail: c.fail}
			p.check(t, do(p), c.wantErr, c.wantCalls, c.wantState)
		})
	}
}

func TestSuspend(t *testing.T) {
	run(t, []callCase{
		{"running process is suspended", Running, "", "GetState Lock Checkpoint", Checkpointed, ""},
		{"lock times out: nothing to undo", Running, "Lock", "GetState Lock", Running, "cuCheckpointProcessLock(pid 7): CUDA_ERROR_NOT_READY"},
		{"checkpoint fails: unlocked again", Running, "Checkpoint", "GetState Lock Checkpoint Unlock", Running, "cuCheckpointProcessCheckpoint"},
		{"checkpoint and unlock fail: both said", Running, "Checkpoint Unlock", "GetState Lock Checkpoint Unlock", Locked, "and unlocking it again: cuCheckpointProcessUnlock"},
		{"already suspended", Checkpointed, "", "GetState", Checkpointed, "it is checkpointed, not running"},
		{"failed process", Failed, "", "GetState", Failed, "it is failed, not running"},
	}, func(p API) error {
		_, err := Suspend(p, 7, time.Second)
		return err
	})
}

func TestResume(t *testing.T) {
	run(t, []callCase{
		{"checkpointed process is restored and unlocked", Checkpointed, "", "GetState Restore Unlock", Running, ""},
		{"locked process is only unlocked", Locked, "", "GetState Unlock", Running, ""},
		{"restore fails: stays checkpointed", Checkpointed, "Restore", "GetState Restore", Checkpointed, "cuCheckpointProcessRestore"},
		{"running process is not suspended", Running, "", "GetState", Running, "it is running, not suspended"},
	}, func(p API) error {
		_, err := Resume(p, 7)
		return err
	})
}

// check compares what Suspend or Resume did to the fake with what a case
// wants: the error (a substring; "" for none), the calls made and the state
// left.
func (f *fakeProcess) check(t *testing.T, err error, wantErr, wantCalls string, wantState State) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("error %v, want none", err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Fatalf("error %v, want one containing %q", err, wantErr)
	}
	if got := strings.Join(f.calls, " "); got != wantCalls {
		t.Errorf("calls = %s, want %s", got, wantCalls)
	}
	if f.state != wantState {
		t.Errorf("state = %s, want %s", f.state, wantState)
	}
}

func TestStateAndErrorText(t *testing.T) {
	for s, want := range map[State]string{Running: "running", Locked: "locked", Checkpointed: "checkpointed", Failed: "failed", 9: "state(9)"} {
		if s.String() != want {
			t.Errorf("State(%d) = %q, want %q", int(s), s, want)
		}
	}
	e := &Error{Call: "cuInit", Code: 100, Name: "CUDA_ERROR_NO_DEVICE"}
	if got := e.Error(); got != "cuInit: CUDA_ERROR_NO_DEVICE (code 100)" {
		t.Errorf("error text %q", got)
	}
	e = &Error{Call: "cuCheckpointProcessLock", PID: 42, Code: 999}
	if got := e.Error(); got != "cuCheckpointProcessLock(pid 42): CUDA error (code 999)" {
		t.Errorf("error text %q", got)
	}
}

// TestOpenWithoutDriver: where libcuda.so.1 cannot be loaded (CI), Open
// says why instead of crashing, and says it the same way every time.
func TestOpenWithoutDriver(t *testing.T) {
	lib, err := Open()
	if err == nil {
		t.Skipf("libcuda is loadable here (driver API %d): TestRealGPU_SuspendInPlace covers it", lib.DriverVersion())
	}
	if !strings.Contains(err.Error(), "CUDA process checkpoints are not available") {
		t.Errorf("Open error %q does not say what is unavailable", err)
	}
	if _, err2 := Open(); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Open = %v, want the same error %v", err2, err)
	}
}
