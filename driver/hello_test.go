package driver

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// buildHello builds examples/hello, the training stand-in.
func buildHello(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH; cannot build examples/hello")
	}
	bin := filepath.Join(t.TempDir(), "hello")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/themis-nomad/themis/examples/hello")
	cmd.Dir = moduleDir
	out, err := cmd.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	return bin
}

// TestHello_PreemptAndResume runs the hello trainer as a themis task, stops
// it as a preemption would (SIGINT within the grace period), and starts a
// replacement allocation of the same job that resumes from the checkpoint.
func TestHello_PreemptAndResume(t *testing.T) {
	bin := buildHello(t)
	e := newTestEnv(t, false, nil)
	stanza := spec.Stanza{GPUs: 1, GracePeriod: "10s"}

	task, tc := newTask("train", "", stanza, "GPU-0")
	task.DeviceEnv["NVIDIA_VISIBLE_DEVICES"] = "GPU-0"
	task.DeviceEnv["CUDA_VISIBLE_DEVICES"] = "0"
	tc.Command, tc.Args = bin, []string{"-steps", "10000", "-step-time", "5ms", "-checkpoint-every", "100000"}
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	log := filepath.Join(task.TaskDir().LogDir, "train.stdout.0")
	readEventually(t, log, "hello: visible GPUs NVIDIA_VISIBLE_DEVICES=GPU-0 CUDA_VISIBLE_DEVICES=0\n")
	readEventually(t, log, "hello: step 20/10000")

	must.NoError(t, e.h.StopTask(task.ID, 10*time.Second, "SIGINT"))
	res := e.wait(t, task.ID, 5*time.Second)
	must.True(t, res.Successful(), must.Sprintf("exit %+v", res))
	out := readEventually(t, log, ", exiting")
	m := regexp.MustCompile(`hello: checkpointed at step (\d+), exiting`).FindStringSubmatch(out)
	must.NotNil(t, m, must.Sprint(out))

	// The replacement alloc (new alloc ID, same job/group/task) resumes.
	next := newTestEnv(t, false, nil)
	task2, tc2 := newTask("train", "", stanza, "GPU-0")
	tc2.Command, tc2.Args = bin, []string{"-steps", m[1], "-step-time", "1ms"}
	must.NoError(t, next.setCheckpointRoot(e.ckptDir))
	_, err = next.start(t, task2, tc2, true)
	must.NoError(t, err)
	must.Eq(t, 0, next.wait(t, task2.ID, 10*time.Second).ExitCode)
	log2 := filepath.Join(task2.TaskDir().LogDir, "train.stdout.0")
	readEventually(t, log2, "hello: resumed from step "+m[1]+"\n")
	readEventually(t, log2, "hello: done")
}
