package driver

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
)

// recoveredExitBound is how long a recovered task's exit may take to reach
// WaitTask. Stopping a re-attached executor takes 1-2 s (go-plugin polls a
// re-attached process's pid once a second, and waits up to 2 s for it to
// exit); the exit must not wait for that.
const recoveredExitBound = 500 * time.Millisecond

// TestRecoverTask_ExitPrompt: a recovered task's exit reaches WaitTask
// promptly, and DestroyTask still stops its executor.
func TestRecoverTask_ExitPrompt(t *testing.T) {
	_, fresh, task, handle := restarted(t, "prompt", `trap 'exit 7' TERM; touch ready; while :; do sleep 0.01; done`)

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

	destroyedForGood(t, fresh, task, handle)
}
