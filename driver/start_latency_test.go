package driver

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// TestStartLatency measures how long StartTask takes through the driver
// harness, called as the Nomad client calls it: each task's cgroups, alloc
// dir and reserved device files (two of four fake GPUs and the shared
// NVIDIA files, where the test runs as root) are made before, and the task
// destroyed after, untimed. It is a measurement, not a check of a bound
// (timings on a shared machine are no behaviour): it runs only when
// THEMIS_START_RUNS says how many starts to time, and logs the median,
// the 90th percentile and the extremes.
//
//	THEMIS_START_RUNS=20 go test ./driver/ -run TestStartLatency -count=1 -v
func TestStartLatency(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("THEMIS_START_RUNS"))
	if runs <= 0 {
		t.Skip("a measurement: set THEMIS_START_RUNS to the number of starts to time")
	}
	var reserved []*drivers.DeviceConfig
	if os.Geteuid() == 0 {
		reserved = makeFakeGPUFiles(t).reserved("nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
	}
	e := newTestEnv(t, false, nil)
	took := make([]time.Duration, 0, runs)
	for i := range runs {
		task, tc := newTask("latency", `exec sleep 60`, spec.Stanza{GPUs: 2})
		task.Devices = reserved
		// Its cleanup also closes the harness: at the end.
		t.Cleanup(e.h.MkAllocDir(task, false))
		_, _ = taskCgroups(t, e, task, testMemoryMB)
		must.NoError(t, task.EncodeConcreteDriverConfig(&tc))

		began := time.Now()
		_, _, err := e.h.StartTask(task)
		took = append(took, time.Since(began))
		must.NoError(t, err, must.Sprintf("start %d", i))

		must.NoError(t, e.h.DestroyTask(task.ID, true))
	}
	slices.Sort(took)
	t.Logf("StartTask over %d starts (fenced: %v): median %s, p90 %s, min %s, max %s",
		runs, currentIsolation().devices, took[len(took)/2].Round(10*time.Microsecond),
		took[len(took)*9/10].Round(10*time.Microsecond), took[0].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond))
}
