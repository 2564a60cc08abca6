package driver

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// recoveredExitBound is how long a recovered task's exit may take to reach
// WaitTask. Stopping a re-attached executor takes 1-2 s (go-plugin polls a
// re-attached process's pid once a second, and waits up to 2 s for it to
// exit); the exit must not wait for that.
const recoveredExitBound = 500 * time.Millisecond

// TestRecoverTask_ExitPrompt: a recovered task's exit reaches WaitTask
// promptly, and DestroyTask still stops its executor.
func TestRecoverTask_ExitPrompt(t *testing.T) {
	e := newTestEnv(t, false, nil)
	task, tc := newTask("prompt", `trap 'exit 7' TERM; while :; do sleep 0.01; done`, spec.Stanza{GPUs: 1})
	handle, err := e.start(t, task, tc, false)
	must.NoError(t, err)
	must.NoError(t, e.h.WaitUntilStarted(task.ID, 5*time.Second))
	e.d.detach(task.ID)
	fresh := newTestEnv(t, false, nil)
	must.NoError(t, fresh.h.RecoverTask(handle))

	ch, err := fresh.h.WaitTask(context.Background(), task.ID)
	must.NoError(t, err)
	h, err := fresh.d.task(task.ID)
	must.NoError(t, err)
	start := time.Now()
	must.NoError(t, h.signal(syscall.SIGTERM))
	var res *drivers.ExitResult
	select {
	case res = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the recovered task's exit never reached WaitTask")
	}
	took := time.Since(start)
	t.Logf("recovered task: SIGTERM -> WaitTask result in %s", took)
	must.NotNil(t, res)
	must.NoError(t, res.Err)
	must.Eq(t, 7, res.ExitCode)
	must.Less(t, recoveredExitBound, took)

	// Nomad destroys the exited task: its executor must be gone after
	// that, not leaked.
	must.NoError(t, fresh.h.DestroyTask(task.ID, false))
	again := newTestEnv(t, false, nil)
	must.ErrorContains(t, again.h.RecoverTask(handle), "re-attach to executor")
}
