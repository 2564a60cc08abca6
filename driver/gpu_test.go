package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
	"github.com/zclconf/go-cty/cty/msgpack"

	"github.com/themis-nomad/themis/device"
	"github.com/themis-nomad/themis/driver/gpususpend"
	"github.com/themis-nomad/themis/driver/internal/gputest"
	"github.com/themis-nomad/themis/planner/spec"
)

// The real-GPU tests of the driver: a PyTorch job on CUDA, given its GPU by
// the themis device plugin's NVML backend (Reserve), run through the driver
// harness, preempted through the checkpoint protocol and resumed, and
// suspended in place. They skip where NVML or a CUDA PyTorch is missing
// (CI). On a GPU machine (docs/nvml.md, "On a real GPU"):
//
//	go test -c -o driver.test ./driver/            # where Go is
//	cd driver && ../driver.test -test.run RealGPU -test.v
//
// THEMIS_DRIVER_GPU_REPORT=file writes the figures for docs/checkpoints.md.

// trainSteps is where the real-GPU training runs finish.
const trainSteps = 3000

// realGPU configures the device plugin's NVML backend, fingerprints the
// node and reserves its first GPU, as a Nomad client does for a task.
func realGPU(t *testing.T) (id string, envs map[string]string, files []*drivers.DeviceConfig) {
	t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Name: "device", Level: hclog.Info, Output: testWriter{t}})
	p := device.NewPlugin(logger)
	schema, err := p.ConfigSchema()
	must.NoError(t, err)
	spec, diags := hclspecutils.Convert(schema)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	file, diags := hclsyntax.ParseConfig([]byte(`backend = "nvml"`), "agent.hcl", hcl.InitialPos)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	val, diags := hcldec.Decode(file.Body, spec, nil)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	data, err := msgpack.Marshal(val, val.Type())
	must.NoError(t, err)
	must.NoError(t, p.SetConfig(&base.Config{PluginConfig: data}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := p.Fingerprint(ctx)
	must.NoError(t, err)
	var resp = <-ch
	if resp == nil || resp.Error != nil || len(resp.Devices) == 0 || len(resp.Devices[0].Devices) == 0 {
		t.Skipf("the NVML backend fingerprints no GPU here (%+v): no GPU to test", resp)
	}
	id = resp.Devices[0].Devices[0].ID
	res, err := p.Reserve([]string{id})
	must.NoError(t, err)
	// As the Nomad client hands a reservation's device specs to the driver
	// (TaskConfig.Devices).
	var paths []string
	for _, d := range res.Devices {
		files = append(files, &drivers.DeviceConfig{TaskPath: d.TaskPath, HostPath: d.HostPath, Permissions: d.CgroupPerms})
		paths = append(paths, d.HostPath)
	}
	t.Logf("reserved %s: env %v, device files %v", id, res.Envs, paths)
	return id, res.Envs, files
}

// reservation is what the device plugin's Reserve gave for a GPU.
type reservation struct {
	envs  map[string]string
	files []*drivers.DeviceConfig
}

// give hands the reservation to a task, as the Nomad client does.
func (r reservation) give(task *drivers.TaskConfig) {
	for k, v := range r.envs {
		task.DeviceEnv[k] = v
	}
	task.Devices = r.files
}

func reserveGPU(t *testing.T) (string, reservation) {
	id, envs, files := realGPU(t)
	return id, reservation{envs: envs, files: files}
}

// gpuJob is one run of testdata/gpu/train_cuda.py through the driver.
type gpuJob struct {
	task *drivers.TaskConfig
	log  string
}

func startGPUJob(t *testing.T, e *testEnv, python string, gpu reservation, args ...string) (*gpuJob, time.Time) {
	t.Helper()
	task, tc := newTask("train", "", spec.Stanza{GPUs: 1, GracePeriod: "60s"})
	gpu.give(task)
	task.Env = map[string]string{
		"HOME": t.TempDir(), "PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED": "1",
		"CUBLAS_WORKSPACE_CONFIG": ":4096:8",
	}
	tc.Command = python
	tc.Args = append([]string{filepath.Join(moduleDir, "testdata", "gpu", "train_cuda.py")}, args...)
	if ok, why := taskCgroups(t, e, task, 64<<10); !ok {
		t.Logf("the task runs without cgroups: %s", why)
	}
	began := time.Now()
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	return &gpuJob{task: task, log: filepath.Join(task.TaskDir().LogDir, "train.stdout.0")}, began
}

// waitFor waits until the job's stdout matches re and returns the match and
// when it was seen (to the 20 ms the log is polled at).
func (j *gpuJob) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) ([]string, time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	var out string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(j.log)
		out = string(b)
		if m := re.FindStringSubmatch(out); m != nil {
			return m, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	errs, _ := os.ReadFile(strings.Replace(j.log, ".stdout.", ".stderr.", 1))
	t.Fatalf("%s: no %q within %s\nstdout:\n%s\nstderr:\n%s", j.log, re, within, out, errs)
	return nil, time.Time{}
}

// losses are the "train: step N loss L" lines of a job's stdout, by step.
func (j *gpuJob) losses(t *testing.T) map[int]string {
	b, err := os.ReadFile(j.log)
	must.NoError(t, err)
	out := map[int]string{}
	for _, m := range regexp.MustCompile(`train: step (\d+) loss (\S+)`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[1])
		out[n] = m[2]
	}
	return out
}

var (
	reDevice     = regexp.MustCompile(`train: device (.+) uuid (\S+) count (\d+) CUDA_VISIBLE_DEVICES=(\S*)`)
	reDone       = regexp.MustCompile(`train: done step (\d+) loss (\S+) digest ([0-9a-f]+)`)
	reCheckpoint = regexp.MustCompile(`train: checkpointed at step (\d+) in (\S+) s \((\d+) bytes\), exiting`)
	reResumed    = regexp.MustCompile(`train: resumed from step (\d+) in (\S+) s`)
	reModel      = regexp.MustCompile(`train: model (\d+) parameters, (\d+) MiB`)
)

func stepRE(n int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`train: step %d loss (\S+)`, n))
}

// TestRealGPU_CUDAJobPreemptedAndResumed runs a PyTorch CUDA job through
// the driver on the GPU the device plugin reserved, preempts it through the
// checkpoint protocol (notice, SIGTERM, checkpoint, exit 0) and resumes it
// in a new allocation; the resumed run must continue at the next step and
// end with the same weights, bit for bit, as an uninterrupted run.
func TestRealGPU_CUDAJobPreemptedAndResumed(t *testing.T) {
	python, why := gputest.TorchPython()
	if python == "" {
		t.Skip(why)
	}
	id, gpu := reserveGPU(t)
	var report strings.Builder
	steps := strconv.Itoa(trainSteps)

	// The job sees its GPU, by the UUID the device plugin gave it.
	first := newTestEnv(t, false, nil)
	a, began := startGPUJob(t, first, python, gpu, "--steps", steps)
	dev, seen := a.waitFor(t, reDevice, 3*time.Minute)
	if dev[2] != id || dev[3] != "1" {
		t.Errorf("the job sees %s CUDA device(s), the first %s; it was given one, %s", dev[3], dev[2], id)
	}
	model, _ := a.waitFor(t, reModel, time.Minute)
	fmt.Fprintf(&report, "GPU %s (%s); model %s parameters, %s MiB of weights (Adam state twice that); start to CUDA device seen %s\n",
		id, dev[1], model[1], model[2], seen.Sub(began).Round(time.Millisecond))

	// Preempted mid-run: StopTask as Nomad calls it for the planner's revoke.
	a.waitFor(t, stepRE(300), 3*time.Minute)
	stopAt := time.Now()
	must.NoError(t, first.h.StopTask(a.task.ID, 60*time.Second, "SIGTERM"))
	res := first.wait(t, a.task.ID, 90*time.Second)
	stopTook := time.Since(stopAt)
	must.True(t, res.Successful(), must.Sprintf("exit %+v", res))
	ck, _ := a.waitFor(t, reCheckpoint, 5*time.Second)
	at, _ := strconv.Atoi(ck[1])
	must.Less(t, trainSteps, at, must.Sprint("the job finished before it was preempted: nothing tested"))
	fmt.Fprintf(&report, "preempted at step %d: StopTask to exit %s (the job's own save %s s, %s bytes)\n",
		at, stopTook.Round(time.Millisecond), ck[2], ck[3])

	// Resumed in a new allocation of the job, from the checkpoint.
	second := newTestEnv(t, false, nil)
	must.NoError(t, second.setCheckpointRoot(first.ckptDir))
	b, began := startGPUJob(t, second, python, gpu, "--steps", steps)
	rs, resumedAt := b.waitFor(t, reResumed, 3*time.Minute)
	must.Eq(t, strconv.Itoa(at), rs[1])
	_, steppedAt := b.waitFor(t, stepRE(at+1), time.Minute)
	done, _ := b.waitFor(t, reDone, 5*time.Minute)
	must.Eq(t, 0, second.wait(t, b.task.ID, time.Minute).ExitCode)
	fmt.Fprintf(&report, "resumed: StartTask to checkpoint loaded %s (the load itself %s s), to step %d done %s\n",
		resumedAt.Sub(began).Round(time.Millisecond), rs[2], at+1, steppedAt.Sub(began).Round(time.Millisecond))

	// The same job uninterrupted ends with the same weights.
	third := newTestEnv(t, false, nil)
	c, _ := startGPUJob(t, third, python, gpu, "--steps", steps)
	ref, _ := c.waitFor(t, reDone, 5*time.Minute)
	must.Eq(t, 0, third.wait(t, c.task.ID, time.Minute).ExitCode)
	before, after, whole := a.losses(t), b.losses(t), c.losses(t)
	for step, loss := range after {
		if want, ok := whole[step]; ok && want != loss {
			t.Errorf("step %d: loss %s after resume, %s uninterrupted", step, loss, want)
		}
	}
	for step, loss := range before {
		if want, ok := whole[step]; ok && want != loss {
			t.Errorf("step %d: loss %s before preemption, %s uninterrupted", step, loss, want)
		}
	}
	if done[3] != ref[3] {
		t.Errorf("preempted and resumed: final loss %s digest %s; uninterrupted: loss %s digest %s", done[2], done[3], ref[2], ref[3])
	}
	fmt.Fprintf(&report, "step %d: resumed run loss %s digest %.16s..., uninterrupted loss %s digest %.16s... (equal: %v)\n",
		trainSteps, done[2], done[3], ref[2], ref[3], done[3] == ref[3])
	t.Log("\n" + report.String())
	writeGPUReport(t, "preempt and resume through the checkpoint protocol", report.String())
}

// TestRealGPU_SuspendInPlaceThroughDriver suspends a running job started by
// the driver with the CUDA process-checkpoint API (driver/gpususpend): its
// steps stop and its GPU memory is released while suspended; after the
// resume it steps on from where it was, and then stops through the protocol.
func TestRealGPU_SuspendInPlaceThroughDriver(t *testing.T) {
	python, why := gputest.TorchPython()
	if python == "" {
		t.Skip(why)
	}
	lib, err := gpususpend.Open()
	if err != nil {
		t.Skip(err)
	}
	_, gpu := reserveGPU(t)
	e := newTestEnv(t, false, nil)
	j, _ := startGPUJob(t, e, python, gpu, "--steps", "100000000")
	j.waitFor(t, stepRE(200), 3*time.Minute)
	h, err := e.d.task(j.task.ID)
	must.NoError(t, err)
	gpuBefore, _, _ := gputest.ProcessGPUMemoryMiB(h.pid)
	rssBefore := gputest.VmRSSMiB(h.pid)

	st, err := gpususpend.Suspend(lib, h.pid, 30*time.Second)
	must.NoError(t, err)
	gpuSuspended, listed, _ := gputest.ProcessGPUMemoryMiB(h.pid)
	rssSuspended := gputest.VmRSSMiB(h.pid)
	last := lastStep(j.losses(t))
	time.Sleep(2 * time.Second)
	if now := lastStep(j.losses(t)); now > last+10 {
		t.Errorf("the job stepped from %d to %d while suspended", last, now)
	}
	if listed && gpuSuspended*10 > gpuBefore {
		t.Errorf("suspended job still holds %d of its %d GPU MiB", gpuSuspended, gpuBefore)
	}
	rt, err := gpususpend.Resume(lib, h.pid)
	must.NoError(t, err)
	next := (last/10 + 2) * 10
	j.waitFor(t, stepRE(next), time.Minute)
	must.NoError(t, e.h.StopTask(j.task.ID, 60*time.Second, "SIGTERM"))
	res := e.wait(t, j.task.ID, 90*time.Second)
	must.True(t, res.Successful(), must.Sprintf("exit %+v", res))
	j.waitFor(t, reCheckpoint, 5*time.Second)
	report := fmt.Sprintf("training job pid %d at step %d: lock %s, checkpoint %s; restore %s, unlock %s; "+
		"GPU MiB %d -> %d (listed: %v); RSS MiB %d -> %d; stepped on to %d after resume, then checkpointed and exited 0\n",
		h.pid, last, st.Lock.Round(time.Millisecond), st.Checkpoint.Round(time.Millisecond),
		rt.Restore.Round(time.Millisecond), rt.Unlock.Round(time.Millisecond),
		gpuBefore, gpuSuspended, listed, rssBefore, rssSuspended, next)
	t.Log(report)
	writeGPUReport(t, "suspend in place of a driver-run job", report)
}

func lastStep(losses map[int]string) int {
	last := 0
	for s := range losses {
		last = max(last, s)
	}
	return last
}

// TestRealGPU_DeviceIsolation: a task given the GPU opens its device file
// and CUDA runs on it; a task given no GPU gets EPERM on every GPU's device
// file and CUDA finds no device, whatever CUDA_VISIBLE_DEVICES says (the
// driver's device cgroup, driver/devices.go).
func TestRealGPU_DeviceIsolation(t *testing.T) {
	python, why := gputest.TorchPython()
	if python == "" {
		t.Skip(why)
	}
	_, gpu := reserveGPU(t)
	probe := `import glob, os, torch
for p in sorted(glob.glob("/dev/nvidia[0-9]*")):
    try:
        os.close(os.open(p, os.O_RDWR)); print("probe: open", p, "ok")
    except OSError as e:
        print("probe: open", p, "failed errno", e.errno)
try:
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n:
        torch.ones(1, device="cuda").add_(1); torch.cuda.synchronize()
except Exception as e:
    n = "error " + type(e).__name__
print("probe: cuda devices", n)
`
	run := func(name string, r reservation) string {
		e := newTestEnv(t, false, nil)
		task, tc := newTask(name, "", spec.Stanza{GPUs: 1})
		r.give(task)
		task.Env = map[string]string{"HOME": t.TempDir(), "PATH": "/usr/local/bin:/usr/bin:/bin"}
		tc.Command, tc.Args = python, []string{"-c", probe}
		if ok, why := taskCgroups(t, e, task, 16<<10); !ok {
			t.Logf("the task runs without cgroups: %s", why)
		}
		_, err := e.start(t, task, tc, true)
		must.NoError(t, err)
		must.Eq(t, 0, e.wait(t, task.ID, 3*time.Minute).ExitCode)
		out := readEventually(t, filepath.Join(task.TaskDir().LogDir, name+".stdout.0"), "probe: cuda devices")
		t.Logf("%s:\n%s", name, out)
		return out
	}
	given := run("given", gpu)
	must.StrContains(t, given, "probe: open /dev/nvidia0 ok\n")
	must.StrContains(t, given, "probe: cuda devices 1\n")
	// Given none, but told the GPU's name: the fence, not the variable, decides.
	notGiven := run("notgiven", reservation{envs: map[string]string{"CUDA_VISIBLE_DEVICES": gpu.envs["CUDA_VISIBLE_DEVICES"]}})
	must.StrContains(t, notGiven, "probe: open /dev/nvidia0 failed errno 1\n")
	must.StrNotContains(t, notGiven, " ok\n")
	must.StrNotContains(t, notGiven, "probe: cuda devices 1\n")
	writeGPUReport(t, "device files a task can open", "task given the GPU:\n"+given+"task given none (CUDA_VISIBLE_DEVICES naming the GPU all the same):\n"+notGiven)
}

// writeGPUReport appends a section to THEMIS_DRIVER_GPU_REPORT, if set.
func writeGPUReport(t *testing.T, title, body string) {
	path := os.Getenv("THEMIS_DRIVER_GPU_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	must.NoError(t, err)
	defer f.Close()
	_, err = fmt.Fprintf(f, "## %s (%s)\n\n%s\n", title, time.Now().UTC().Format(time.RFC3339), body)
	must.NoError(t, err)
}
