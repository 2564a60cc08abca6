package driver

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/base"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// setGPUHoldTimeout reconfigures the driver's gpu_hold_timeout.
func (e *testEnv) setGPUHoldTimeout(t *testing.T, d time.Duration) {
	t.Helper()
	cfg, _ := e.d.current()
	cfg.GPUHoldTimeout = d.String()
	var data []byte
	must.NoError(t, base.MsgPackEncode(&data, &cfg))
	must.NoError(t, e.h.SetConfig(&base.Config{PluginConfig: data}))
}

// A task never starts on a GPU that a live process of another allocation
// holds on this node (gpuholds.go): its start waits, with a task event
// naming the holder, and fails naming it at gpu_hold_timeout; a holder
// that ends lets it start; a record whose process is gone, the task's own
// allocation and other GPUs do not hold it. The records are on disk, so a
// fresh driver (a Nomad client killed with kill -9 and started again: its
// old task's executor lives on) sees the old task's hold.
func TestStartWaitsForAGPUAnotherAllocationHolds(t *testing.T) {
	const runs = `echo > ready; while :; do sleep 0.05; done`
	cases := []struct {
		name string
		// holder is the first task's script; its allocation is A.
		holder string
		// detach: the holder's driver goes (the client was killed) and a
		// fresh driver, same checkpoint root, starts the second task.
		detach bool
		// exited: the holder exits and is never destroyed (its record
		// stays, stale).
		exited bool
		// sameAlloc: the second task is of the holder's allocation;
		// gpu is the second task's GPU.
		sameAlloc bool
		gpu       string
		timeout   time.Duration
		// wantHeld: the start fails naming the holder; wantWait: it
		// waited at least this long, with an event naming the holder.
		wantHeld bool
		wantWait time.Duration
	}{
		{name: "holder runs: the start fails naming it", holder: runs, gpu: "g0", timeout: 1500 * time.Millisecond, wantHeld: true, wantWait: time.Second},
		{name: "holder's driver gone (client killed): a fresh driver waits too", holder: runs, detach: true, gpu: "g0", timeout: 1500 * time.Millisecond, wantHeld: true, wantWait: time.Second},
		{name: "holder ends while the start waits", holder: `echo > ready; sleep 2`, gpu: "g0", timeout: 20 * time.Second, wantWait: time.Second},
		{name: "holder exited, never destroyed: stale", holder: `echo > ready; exit 0`, exited: true, gpu: "g0", timeout: 20 * time.Second},
		{name: "the same allocation's task", holder: runs, sameAlloc: true, gpu: "g0", timeout: 20 * time.Second},
		{name: "another GPU", holder: runs, gpu: "g1", timeout: 20 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := newTestEnv(t, false, nil)
			holder, htc := newTask("holder", tc.holder, spec.Stanza{GPUs: 1}, "g0")
			hh, err := old.start(t, holder, htc, false)
			must.NoError(t, err)
			must.NoError(t, old.h.WaitUntilStarted(holder.ID, 5*time.Second))
			waitFile(t, holder.TaskDir().Dir+"/ready", 5*time.Second)
			if tc.exited {
				old.wait(t, holder.ID, 5*time.Second)
			}
			e := old
			if tc.detach {
				old.d.detach(holder.ID)
				e = newTestEnv(t, false, nil)
				must.NoError(t, e.setCheckpointRoot(old.ckptDir))
				t.Cleanup(func() {
					// The fresh driver takes the old task over and ends it.
					if e.h.RecoverTask(hh) == nil {
						_ = e.h.DestroyTask(holder.ID, true)
					}
				})
			}
			e.setGPUHoldTimeout(t, tc.timeout)
			events := stopEvents(t, e)
			next, ntc := newTask("next", `exit 0`, spec.Stanza{GPUs: 1}, tc.gpu)
			if tc.sameAlloc {
				next.AllocID = holder.AllocID
			}
			began := time.Now()
			_, err = e.start(t, next, ntc, false)
			took := time.Since(began)
			if tc.wantHeld {
				must.ErrorContains(t, err, "held by allocation "+holder.AllocID)
				must.ErrorContains(t, err, "gpu_hold_timeout")
			} else {
				must.NoError(t, err)
			}
			if tc.wantWait == 0 {
				must.Less(t, time.Second, took)
				must.Nil(t, findEvent(events(), eventGPUHeld))
				return
			}
			must.Greater(t, tc.wantWait, took)
			ev := findEvent(events(), eventGPUHeld)
			must.NotNil(t, ev)
			must.Eq(t, holder.AllocID, ev.Annotations["holder_alloc"])
			must.Eq(t, "g0", ev.Annotations["gpu"])
			must.True(t, strings.HasSuffix(ev.Annotations["holder_job"], testJob))
		})
	}
}
