package driver

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/spec"
)

const (
	testJob       = "train"
	testNamespace = "default"
)

// fakeLeases is the LeaseReader double: a map of GPU id to lease.
type fakeLeases struct {
	leases  map[string]*lease.GPULease
	jobs    map[string]*lease.JobLease // by lease.JobKey
	pingErr error
	readErr error
	jobErr  error

	mu         sync.Mutex
	reports    []lease.CheckpointRecord
	progressed []lease.ProgressRecord
}

func (f *fakeLeases) ReportProgress(_ context.Context, rec lease.ProgressRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.progressed = append(f.progressed, rec)
	return nil
}

func (f *fakeLeases) progress() []lease.ProgressRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.progressed)
}

func (f *fakeLeases) JobLease(_ context.Context, namespace, jobID string) (*lease.JobLease, error) {
	if f.jobErr != nil {
		return nil, f.jobErr
	}
	return f.jobs[lease.JobKey(namespace, jobID)], nil
}

func (f *fakeLeases) GPULeases(_ context.Context, ids []string) (map[string]*lease.GPULease, error) {
	if f.readErr != nil {
		return nil, f.readErr
	}
	out := map[string]*lease.GPULease{}
	for _, id := range ids {
		if l, ok := f.leases[id]; ok {
			out[id] = l
		}
	}
	return out, nil
}

func (f *fakeLeases) Ping(context.Context) error { return f.pingErr }

func (f *fakeLeases) ReportCheckpoint(_ context.Context, rec lease.CheckpointRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, rec)
	return nil
}

func (f *fakeLeases) reported() []lease.CheckpointRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reports)
}

func leasedTo(job string, gpus ...string) map[string]*lease.GPULease {
	m := map[string]*lease.GPULease{}
	for _, g := range gpus {
		m[g] = &lease.GPULease{LeaseID: "l-" + job, Namespace: testNamespace, JobID: job, GPU: g, VC: "default"}
	}
	return m
}

type testEnv struct {
	d       *Driver
	h       *dtestutil.DriverHarness
	ckptDir string
	// openAllocDirs makes the harness's alloc dirs reachable by other
	// users (they are under a 0700 temp dir of root's).
	openAllocDirs bool
}

func newTestEnv(t *testing.T, leaseCheck bool, reader LeaseReader) *testEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: testWriter{t}})
	var opts []Option
	if reader != nil {
		opts = append(opts, WithLeaseReader(reader))
	}
	d := New(ctx, logger, opts...)
	// No t.Cleanup(h.Kill): Kill closes the client, whose Shutdown RPC stops
	// the server, then stops it again itself, a data race inside go-plugin.
	// MkAllocDir's cleanup closes the client, which is all that is needed.
	h := dtestutil.NewDriverHarness(t, d)
	root := t.TempDir()
	var data []byte
	// The harness makes alloc dirs in root's 0700 temp dirs, where the
	// default user (nobody) cannot go: tests of anything but the task's
	// user run tasks as the test's own user (root allowed explicitly).
	must.NoError(t, base.MsgPackEncode(&data, &Config{LeaseCheck: leaseCheck, CheckpointRoot: root,
		DefaultUser: currentUser(t), AllowRootJobs: []string{AllowRootAll}}))
	must.NoError(t, h.SetConfig(&base.Config{PluginConfig: data}))
	return &testEnv{d: d, h: h, ckptDir: root}
}

// setCheckpointRoot reconfigures the driver with another checkpoint root.
func (e *testEnv) setCheckpointRoot(root string) error {
	cfg, _ := e.d.current()
	cfg.CheckpointRoot = root
	var data []byte
	if err := base.MsgPackEncode(&data, &cfg); err != nil {
		return err
	}
	e.ckptDir = root
	return e.h.SetConfig(&base.Config{PluginConfig: data})
}

func currentUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	must.NoError(t, err)
	return u.Username
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTask builds a task running sh -c script with the given stanza and the
// themis GPUs Nomad allocated to it.
func newTask(name, script string, stanza spec.Stanza, gpus ...string) (*drivers.TaskConfig, TaskConfig) {
	task := &drivers.TaskConfig{
		ID:            uuid.Generate(),
		AllocID:       uuid.Generate(),
		Name:          name,
		JobID:         testJob,
		JobName:       testJob,
		Namespace:     testNamespace,
		TaskGroupName: "group",
		Env:           map[string]string{},
		// What the themis device plugin's Reserve sets; Nomad's driver
		// protocol carries it, but not the device allocations themselves.
		DeviceEnv: map[string]string{EnvGPUIDs: strings.Join(gpus, ",")},
	}
	return task, TaskConfig{Command: "/bin/sh", Args: []string{"-c", script}, Themis: stanza}
}

func (e *testEnv) start(t *testing.T, task *drivers.TaskConfig, tc TaskConfig, logs bool) (*drivers.TaskHandle, error) {
	t.Helper()
	cleanup := e.h.MkAllocDir(task, logs)
	t.Cleanup(cleanup)
	if e.openAllocDirs {
		must.NoError(t, os.Chmod(filepath.Dir(task.AllocDir), 0o755))
	}
	if task.Resources == nil {
		// As the Nomad client does (taskCgroups); none where the
		// executor applies none.
		_, _ = taskCgroups(t, e, task, testMemoryMB)
	}
	must.NoError(t, task.EncodeConcreteDriverConfig(&tc))
	handle, _, err := e.h.StartTask(task)
	if err == nil {
		t.Cleanup(func() { _ = e.h.DestroyTask(task.ID, true) })
	}
	return handle, err
}

func (e *testEnv) wait(t *testing.T, taskID string, within time.Duration) *drivers.ExitResult {
	t.Helper()
	ch, err := e.h.WaitTask(context.Background(), taskID)
	must.NoError(t, err)
	select {
	case res := <-ch:
		must.NotNil(t, res)
		return res
	case <-time.After(within):
		t.Fatalf("task %s did not exit within %s", taskID, within)
		return nil
	}
}

func readEventually(t *testing.T, path, want string) string {
	t.Helper()
	var got string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		got = string(b)
		if strings.Contains(got, want) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: want it to contain %q, got %q", path, want, got)
	return got
}

func TestStartTask_LogsEnvAndExitCodes(t *testing.T) {
	cases := []struct {
		name     string
		script   string
		exitCode int
		stdout   string
		stderr   string
	}{
		{"echo", `echo hello from themis`, 0, "hello from themis", ""},
		{"stderr", `echo oops >&2; exit 0`, 0, "", "oops"},
		{"exit-code", `echo failing; exit 7`, 7, "failing", ""},
		{"env", `echo "job=$THEMIS_JOB_ID vc=$THEMIS_VC class=$THEMIS_CLASS gpus=$THEMIS_GPUS ids=$THEMIS_GPU_IDS grace=$THEMIS_GRACE_PERIOD pwd=$(pwd)"`, 0,
			"job=train vc=research class=te gpus=2 ids=g0,g1 grace=90", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, false, nil)
			task, tc := newTask(c.name, c.script, spec.Stanza{GPUs: 2, VC: "research", Class: "te", GracePeriod: "90s"}, "g1", "g0")
			_, err := e.start(t, task, tc, true)
			must.NoError(t, err)
			res := e.wait(t, task.ID, 10*time.Second)
			must.Eq(t, c.exitCode, res.ExitCode)
			must.NoError(t, res.Err)
			logDir := task.TaskDir().LogDir
			if c.stdout != "" {
				out := readEventually(t, filepath.Join(logDir, c.name+".stdout.0"), c.stdout)
				if c.name == "env" {
					must.StrContains(t, out, "pwd="+task.TaskDir().Dir)
				}
			}
			if c.stderr != "" {
				readEventually(t, filepath.Join(logDir, c.name+".stderr.0"), c.stderr)
			}
		})
	}
}

func TestStartTask_CheckpointDir(t *testing.T) {
	e := newTestEnv(t, false, nil)
	task, tc := newTask("ckpt", `echo saved > "$THEMIS_CHECKPOINT_DIR/state"`, spec.Stanza{GPUs: 1})
	_, err := e.start(t, task, tc, false)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
	dir := filepath.Join(e.ckptDir, testNamespace, testJob, "group", "ckpt")
	b, err := os.ReadFile(filepath.Join(dir, "state"))
	must.NoError(t, err)
	must.Eq(t, "saved\n", string(b))
	fi, err := os.Stat(dir)
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o700), fi.Mode().Perm())
}

func TestStartTask_BadStanzaNamesField(t *testing.T) {
	cases := []struct {
		stanza spec.Stanza
		field  string
	}{
		{spec.Stanza{GPUs: 0}, "themis.gpus"},
		{spec.Stanza{GPUs: 1, VC: "Bad VC"}, "themis.vc"},
		{spec.Stanza{GPUs: 1, Class: "batch"}, "themis.class"},
		{spec.Stanza{GPUs: 1, Priority: -2}, "themis.priority"},
		{spec.Stanza{GPUs: 1, GracePeriod: "soon"}, "themis.grace_period"},
		{spec.Stanza{GPUs: 1, CheckpointSignal: "SIGKILL"}, "themis.checkpoint_signal"},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			e := newTestEnv(t, false, nil)
			task, tc := newTask("bad", `exit 0`, c.stanza, "g0")
			_, err := e.start(t, task, tc, false)
			must.Error(t, err)
			must.StrContains(t, err.Error(), c.field)
		})
	}
}

func TestStartTask_LeaseCheck(t *testing.T) {
	cases := []struct {
		name    string
		gpus    int
		given   []string
		leases  map[string]*lease.GPULease
		readErr error
		wantErr string // empty: the task starts
		retry   bool   // the error is recoverable: Nomad may restart the task
	}{
		{"leased", 2, []string{"g0", "g1"}, leasedTo(testJob, "g0", "g1"), nil, "", false},
		{"unleased", 2, []string{"g0", "g1"}, leasedTo(testJob, "g0"), nil, "GPU g1 has no themis lease", false},
		{"leased to another job", 1, []string{"g0"}, leasedTo("other", "g0"), nil, `leased to job "other"`, false},
		{"no grant: too few GPUs", 2, []string{"g0"}, leasedTo(testJob, "g0"), nil, "placed without a planner grant", false},
		{"no grant: no GPUs", 1, nil, nil, nil, "placed without a planner grant", false},
		{"consul down", 1, []string{"g0"}, nil, errors.New("connection refused"), "connection refused", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, true, &fakeLeases{leases: c.leases, readErr: c.readErr})
			task, tc := newTask("leasecheck", `exit 0`, spec.Stanza{GPUs: c.gpus}, c.given...)
			_, err := e.start(t, task, tc, false)
			if c.wantErr == "" {
				must.NoError(t, err)
				must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
				return
			}
			must.Error(t, err)
			must.StrContains(t, err.Error(), c.wantErr)
			must.Eq(t, c.retry, structs.IsRecoverable(err))
			_, ierr := e.h.InspectTask(task.ID)
			must.Error(t, ierr) // nothing was started
		})
	}
}

// TestStopTask: StopTask sends the stanza's checkpoint_signal (not Nomad's
// kill_signal) and returns as soon as the task exits.
func TestStopTask(t *testing.T) {
	cases := []struct {
		name     string
		script   string
		stanza   string // checkpoint_signal
		signal   string // Nomad's kill_signal, not used
		wantCode int
	}{
		{"default SIGTERM", `trap 'exit 5' TERM; echo ready; while :; do sleep 0.05; done`, "", "SIGINT", 5},
		{"checkpoint_signal SIGINT", `trap 'echo got INT; exit 0' INT; trap '' TERM; echo ready; while :; do sleep 0.05; done`, "SIGINT", "SIGTERM", 0},
		{"checkpoint_signal usr1", `trap 'exit 7' USR1; echo ready; while :; do sleep 0.05; done`, "usr1", "", 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, false, nil)
			task, tc := newTask("stop", c.script, spec.Stanza{GPUs: 1, GracePeriod: "20s", CheckpointSignal: c.stanza})
			_, err := e.start(t, task, tc, true)
			must.NoError(t, err)
			must.NoError(t, e.h.WaitUntilStarted(task.ID, 5*time.Second))
			readEventually(t, filepath.Join(task.TaskDir().LogDir, "stop.stdout.0"), "ready")

			// A live task cannot be destroyed without force.
			must.ErrorContains(t, e.h.DestroyTask(task.ID, false), "still running")

			began := time.Now()
			must.NoError(t, e.h.StopTask(task.ID, 20*time.Second, c.signal))
			took := time.Since(began)
			res := e.wait(t, task.ID, 5*time.Second)
			must.Eq(t, 0, res.Signal)
			must.Eq(t, c.wantCode, res.ExitCode)
			must.Less(t, 10*time.Second, took) // returned once the process was gone
			st, err := e.h.InspectTask(task.ID)
			must.NoError(t, err)
			must.Eq(t, drivers.TaskStateExited, st.State)
			must.NoError(t, e.h.DestroyTask(task.ID, false))
		})
	}
}

func TestDestroyTask_KillsLeftoverGroup(t *testing.T) {
	e := newTestEnv(t, false, nil)
	task, tc := newTask("orphans", `sleep 60 & echo $! > orphan.pid; exit 0`, spec.Stanza{GPUs: 1})
	// With logs, stdout is a FIFO the orphan inherits as a file; without,
	// the executor copies from a pipe the orphan holds open until it dies.
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, task.ID, 5*time.Second).ExitCode)
	b, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, "orphan.pid"))
	must.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must.NoError(t, err)
	st, err := readProcStat(pid)
	must.NoError(t, err)
	must.NotEq(t, byte('Z'), st.State, must.Sprint("the orphan must outlive the leader for this test"))

	must.NoError(t, e.h.DestroyTask(task.ID, false))
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := readProcStat(pid)
		if err != nil || st.State == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d of the task's group survived DestroyTask", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSignalTaskAndStats(t *testing.T) {
	e := newTestEnv(t, false, nil)
	// Burns CPU and holds ~ a few MB; exits 3 on SIGUSR1.
	task, tc := newTask("sig", `trap 'exit 3' USR1; echo ready; while :; do :; done`, spec.Stanza{GPUs: 1})
	// The executor finds the task's processes in its cgroup where cgroups
	// are on, and by pid where they are off.
	if ok, why := taskCgroups(t, e, task, 256); !ok && cgroupslib.GetMode() != cgroupslib.OFF {
		t.Skipf("the executor cannot see the task's processes here: %s", why)
	}
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	readEventually(t, filepath.Join(task.TaskDir().LogDir, "sig.stdout.0"), "ready")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The executor rescans the task's processes every 5s, and a process's
	// CPU share needs two scans.
	ch, err := e.h.TaskStats(ctx, task.ID, 500*time.Millisecond)
	must.NoError(t, err)
	var sawCPU bool
	for i := 0; i < 40 && !sawCPU; i++ {
		select {
		case u := <-ch:
			must.NotNil(t, u.ResourceUsage)
			must.Positive(t, u.ResourceUsage.MemoryStats.RSS)
			sawCPU = u.ResourceUsage.CpuStats.Percent > 1
		case <-time.After(5 * time.Second):
			t.Fatal("no stats")
		}
	}
	must.True(t, sawCPU, must.Sprint("a busy loop must show CPU use"))

	must.ErrorContains(t, e.h.SignalTask(task.ID, "SIGNOPE"), "unknown signal")
	must.NoError(t, e.h.SignalTask(task.ID, "SIGUSR1"))
	must.Eq(t, 3, e.wait(t, task.ID, 5*time.Second).ExitCode)
}

// TestRecoverTask: a fresh driver, as after a plugin restart, re-attaches
// to the task's executor, runs the checkpoint protocol through it and
// reports the task's real exit code.
func TestRecoverTask(t *testing.T) {
	e, fresh, task, handle := restarted(t, "recover", `trap 'exit 42' TERM; touch ready; while :; do sleep 0.05; done`)
	st, err := fresh.h.InspectTask(task.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, st.State)
	must.Eq(t, "true", st.DriverAttributes["recovered"])

	must.NoError(t, fresh.h.StopTask(task.ID, 5*time.Second, "SIGINT"))
	res := fresh.wait(t, task.ID, 5*time.Second)
	must.NoError(t, res.Err)
	must.Eq(t, 42, res.ExitCode)
	// The re-attached task went through the checkpoint protocol too.
	n, err := ReadNotice(filepath.Join(e.ckptDir, testNamespace, testJob, "group", "recover", NoticeFileName))
	must.NoError(t, err)
	must.Eq(t, DefaultStopReason, n.Reason)

	destroyedForGood(t, fresh, task, handle)
}

// restarted starts a task named name running script in one driver, then
// recovers it in a fresh driver, as after a plugin restart: the old
// driver process is gone, so it neither waits for the task nor stops its
// executor any more. The script touches "ready" in its task dir once it
// has set its traps (a signal before that kills the shell instead: exit
// 143 for SIGTERM), and restarted waits for it. It returns both drivers'
// envs, the task and the handle Nomad keeps.
func restarted(t *testing.T, name, script string) (old, fresh *testEnv, task *drivers.TaskConfig, handle *drivers.TaskHandle) {
	t.Helper()
	old = newTestEnv(t, false, nil)
	task, tc := newTask(name, script, spec.Stanza{GPUs: 1})
	handle, err := old.start(t, task, tc, false)
	must.NoError(t, err)
	must.NoError(t, old.h.WaitUntilStarted(task.ID, 5*time.Second))
	ready := filepath.Join(task.TaskDir().Dir, "ready")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task did not touch %s within 5s", ready)
		}
	}
	old.d.detach(task.ID)
	fresh = newTestEnv(t, false, nil)
	must.NoError(t, fresh.h.RecoverTask(handle))
	return old, fresh, task, handle
}

// destroyedForGood destroys an exited task in e, as Nomad does, and checks
// that its executor is gone, not leaked: recovering it again fails (so
// Nomad would restart the task).
func destroyedForGood(t *testing.T, e *testEnv, task *drivers.TaskConfig, handle *drivers.TaskHandle) {
	t.Helper()
	must.NoError(t, e.h.DestroyTask(task.ID, false))
	noDeviceCgroup(t, task)
	again := newTestEnv(t, false, nil)
	must.ErrorContains(t, again.h.RecoverTask(handle), "re-attach to executor")
}

func TestRecoverTask_NoExecutor(t *testing.T) {
	task, _ := newTask("old", `exit 0`, spec.Stanza{GPUs: 1})
	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = task
	must.NoError(t, handle.SetDriverState(taskState{TaskConfig: task, Pid: 1}))
	e := newTestEnv(t, false, nil)
	must.ErrorContains(t, e.h.RecoverTask(handle), "no executor to re-attach to")
}

func TestFingerprint(t *testing.T) {
	cases := []struct {
		name       string
		leaseCheck bool
		pingErr    error
		health     drivers.HealthState
		desc       string
	}{
		{"healthy", true, nil, drivers.HealthStateHealthy, drivers.DriverHealthy},
		{"consul down", true, errors.New("dial tcp: connection refused"), drivers.HealthStateUnhealthy, "connection refused"},
		{"check off", false, errors.New("never asked"), drivers.HealthStateHealthy, drivers.DriverHealthy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, c.leaseCheck, &fakeLeases{pingErr: c.pingErr})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := e.h.Fingerprint(ctx)
			must.NoError(t, err)
			select {
			case fp := <-ch:
				must.Eq(t, c.health, fp.Health)
				must.StrContains(t, fp.HealthDescription, c.desc)
				v, ok := fp.Attributes[attrVersion].GetString()
				must.True(t, ok)
				must.Eq(t, PluginVersion, v)
				// What the executor can isolate on this client is said.
				iso := currentIsolation()
				cg, _ := fp.Attributes[attrCgroups].GetString()
				must.Eq(t, iso.cgroups, cg)
				users, _ := fp.Attributes[attrUsers].GetBool()
				must.Eq(t, os.Geteuid() == 0, users)
				limits, _ := fp.Attributes[attrLimits].GetBool()
				must.Eq(t, os.Geteuid() == 0 && cgroupslib.GetMode() != cgroupslib.OFF, limits)
				devs, ok := fp.Attributes[attrDevices].GetBool()
				must.True(t, ok)
				must.Eq(t, iso.devices, devs)
				if !devs && c.health == drivers.HealthStateHealthy {
					must.StrContains(t, fp.HealthDescription, "can open every GPU's device file")
				}
				if !limits && c.health == drivers.HealthStateHealthy {
					must.StrContains(t, fp.HealthDescription, "without cpu and memory limits")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no fingerprint")
			}
		})
	}
}

func TestTaskConfigSchema_HCL(t *testing.T) {
	var tc *TaskConfig
	hclutils.NewConfigParser(taskConfigSpec()).ParseHCL(t, `
config {
  command = "hello"
  args    = ["-steps", "5"]
  themis {
    gpus         = 2
    vc           = "research"
    grace_period = "2m"
    checkpoint_signal = "SIGUSR1"
  }
}`, &tc)
	must.Eq(t, &TaskConfig{
		Command: "hello",
		Args:    []string{"-steps", "5"},
		Themis:  spec.Stanza{GPUs: 2, VC: "research", GracePeriod: "2m", CheckpointSignal: "SIGUSR1"},
	}, tc)
	in, err := tc.intent()
	must.NoError(t, err)
	must.Eq(t, 2*time.Minute, in.GracePeriod)
	must.Eq(t, spec.DefaultClass, in.Class)
	must.Eq(t, "SIGUSR1", in.CheckpointSignal)

	var pc *Config
	hclutils.NewConfigParser(configSpec()).ParseHCL(t, `config {}`, &pc)
	must.Eq(t, &Config{ConsulAddress: DefaultConsulAddress, LeaseCheck: true, CheckpointRoot: DefaultCheckpointRoot,
		KeepCheckpoints: DefaultKeepCheckpoints, DynamicUserMin: DefaultDynamicUserMin, DynamicUserMax: DefaultDynamicUserMax,
		GangTimeout: DefaultGangTimeout.String(), GPUHoldTimeout: DefaultGPUHoldTimeout.String()}, pc)
	must.StrNotHasPrefix(t, os.TempDir(), pc.CheckpointRoot)
	hclutils.NewConfigParser(configSpec()).ParseHCL(t, `config {
  keep_checkpoints     = 5
  allowed_users        = ["research/svc-train", "*/ml"]
  supplementary_groups = ["video"]
  allow_root_jobs      = ["ops", "research/setup"]
}`, &pc)
	must.Eq(t, 5, pc.KeepCheckpoints)
	must.Eq(t, []string{"research/svc-train", "*/ml"}, pc.AllowedUsers)
	must.Eq(t, []string{"video"}, pc.SupplementaryGroups)
	must.Eq(t, []string{"ops", "research/setup"}, pc.AllowRootJobs)
}

// HCL numbers can be fractional; the error must still name the field.
func TestDecodeTaskConfig_Fractions(t *testing.T) {
	cases := []struct {
		themis map[string]any
		err    string
		want   spec.Stanza
	}{
		{map[string]any{"gpus": 2.0, "priority": -1.0, "vc": "a"}, "", spec.Stanza{GPUs: 2, Priority: -1, VC: "a"}},
		{map[string]any{"gpus": 1.5}, "themis.gpus: must be a whole number, got 1.5", spec.Stanza{}},
		{map[string]any{"gpus": 1, "priority": 0.5}, "themis.priority: must be a whole number, got 0.5", spec.Stanza{}},
	}
	for _, c := range cases {
		cfg := &drivers.TaskConfig{}
		must.NoError(t, cfg.EncodeConcreteDriverConfig(map[string]any{"command": "x", "themis": c.themis}))
		tc, err := decodeTaskConfig(cfg)
		if c.err != "" {
			must.EqError(t, err, c.err)
			continue
		}
		must.NoError(t, err)
		must.Eq(t, c.want, tc.Themis)
	}
}

func TestParseSignal(t *testing.T) {
	cases := []struct {
		in   string
		want syscall.Signal
		err  bool
	}{
		{"", syscall.SIGINT, false},
		{"SIGTERM", syscall.SIGTERM, false},
		{"term", syscall.SIGTERM, false},
		{"SIGUSR1", syscall.SIGUSR1, false},
		{"SIGBOGUS", 0, true},
	}
	for _, c := range cases {
		got, err := parseSignal(c.in)
		if c.err {
			must.Error(t, err)
			continue
		}
		must.NoError(t, err)
		must.Eq(t, c.want, got)
	}
}

func TestParseProcStat(t *testing.T) {
	line := "4242 (my (odd) cmd) S 1 4200 4242 0 -1 4194560 100 0 0 0 25 7 0 0 20 0 1 0 123456 1000000 321 18446744073709551615"
	st, err := parseProcStat(line)
	must.NoError(t, err)
	must.Eq(t, procStat{State: 'S', PGrp: 4200, Start: 123456}, st)
	_, err = parseProcStat("4242 (x) S 1")
	must.Error(t, err)
	must.Eq(t, []int{os.Getpid()}, slices.DeleteFunc(groupMembers(syscall.Getpgrp()), func(p int) bool { return p != os.Getpid() }))
}

func TestAllocatedGPUs(t *testing.T) {
	cases := []struct {
		name      string
		devices   []*structs.AllocatedDeviceResource
		deviceEnv map[string]string
		want      []string
	}{
		{"none", nil, nil, []string{}},
		{"device env", nil, map[string]string{EnvGPUIDs: "g2, g1"}, []string{"g1", "g2"}},
		{"allocated devices, other vendors ignored", []*structs.AllocatedDeviceResource{
			{Vendor: GPUVendor, Type: GPUType, Name: "h100", DeviceIDs: []string{"g1", "g0"}},
			{Vendor: "nvidia", Type: "gpu", Name: "a100", DeviceIDs: []string{"n0"}},
		}, nil, []string{"g0", "g1"}},
		{"both agree", []*structs.AllocatedDeviceResource{
			{Vendor: GPUVendor, Type: GPUType, Name: "h100", DeviceIDs: []string{"g0"}},
		}, map[string]string{EnvGPUIDs: "g0"}, []string{"g0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &drivers.TaskConfig{DeviceEnv: c.deviceEnv, Env: map[string]string{EnvGPUIDs: "spoofed"},
				Resources: &drivers.Resources{NomadResources: &structs.AllocatedTaskResources{Devices: c.devices}}}
			must.Eq(t, c.want, allocatedGPUs(cfg))
		})
	}
}

// detach makes the driver let go of a task without stopping it, as a driver
// process that exits leaves its tasks' executors to the next one.
func (d *Driver) detach(id string) {
	d.tasksMu.Lock()
	defer d.tasksMu.Unlock()
	if h, ok := d.tasks[id]; ok {
		h.detached.Store(true)
		delete(d.tasks, id)
	}
}
