package driver

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
)

// TestStartLatency measures how long StartTask takes through the driver
// harness, called as the Nomad client calls it, with the plugin config's
// defaults (prodEnv: where the driver runs as root, each task a dynamic
// uid of its own allocation's, claimed, its checkpoint and task dirs
// handed over, started through the run-as shim): each task's cgroups,
// alloc dir and reserved device files (two of four fake GPUs and the
// shared NVIDIA files, as root) are made before, and the task destroyed
// after, untimed. It also times StartTask's call to the task's first
// command (the task writes the time: the executor, the shim and the
// shell's start). It is a measurement, not a check of a bound (timings on
// a shared machine are no behaviour): it runs only when THEMIS_START_RUNS
// says how many starts to time, and logs medians, the 90th percentile and
// the extremes.
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
	e := prodEnv(t, nil, nil)
	start := make([]time.Duration, 0, runs)
	first := make([]time.Duration, 0, runs)
	for i := range runs {
		task, tc := jobTask("latency-"+strconv.Itoa(i), "latency", `date +%s%N > "$THEMIS_CHECKPOINT_DIR/t0"; exec sleep 60`)
		task.Devices = reserved
		// Its cleanup also closes the harness: at the end.
		t.Cleanup(e.h.MkAllocDir(task, false))
		must.NoError(t, os.Chmod(filepath.Dir(task.AllocDir), 0o755))
		_, _ = taskCgroups(t, e, task, testMemoryMB)
		must.NoError(t, task.EncodeConcreteDriverConfig(&tc))

		began := time.Now()
		_, _, err := e.h.StartTask(task)
		start = append(start, time.Since(began))
		must.NoError(t, err, must.Sprintf("start %d", i))
		ns, err := strconv.ParseInt(waitFile(t, filepath.Join(e.ckptDirOf(task), "t0"), 10*time.Second), 10, 64)
		must.NoError(t, err)
		first = append(first, time.Unix(0, ns).Sub(began))

		must.NoError(t, e.h.DestroyTask(task.ID, true))
	}
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	for _, m := range []struct {
		what string
		took []time.Duration
	}{{"StartTask", start}, {"StartTask to the task's first command", first}} {
		slices.Sort(m.took)
		t.Logf("%s over %d starts (fenced: %v): median %s, p90 %s, min %s, max %s", m.what,
			runs, currentIsolation().devices, r(m.took[len(m.took)/2]), r(m.took[len(m.took)*9/10]), r(m.took[0]), r(m.took[len(m.took)-1]))
	}
}
