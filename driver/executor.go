package driver

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/client/lib/numalib"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"
)

// Tasks run through Nomad's executor (drivers/shared/executor), as with the
// exec and raw_exec drivers: the driver starts one executor process per task
// (this binary re-executed as "themis-driver executor <config>"; the
// executor package's init serves it), and the executor starts the command
// as the task's user, in its own process group and, where the client can,
// in the task's cgroups with its CPU and memory limits. The executor is the
// command's parent: it survives a driver restart, RecoverTask re-attaches to
// it, and it reports the real exit status and the resource usage.

// launchSpec is what launch starts.
type launchSpec struct {
	path, dir string
	args, env []string
	user      taskUser
	// fence holds the task to its device files; nil: none on this client.
	fence *deviceFence
	// tmp is the shim's private temporary files (privateTmpArg); "" for
	// none.
	tmp string
}

// launch starts the task's command through a new executor, in its device
// fence where it has one (device_fence.go).
func (d *Driver) launch(logger hclog.Logger, cfg *drivers.TaskConfig, spec launchSpec) (h *taskHandle, err error) {
	d.mu.RLock()
	nomadCfg, compute := d.nomadConfig, d.compute
	d.mu.RUnlock()
	execCfg := &executor.ExecutorConfig{
		LogFile:  executorLog(cfg),
		LogLevel: "debug",
		Compute:  compute,
	}
	command := &executor.ExecCommand{
		Cmd:              spec.path,
		Args:             spec.args,
		Env:              spec.env,
		TaskDir:          spec.dir,
		StdoutPath:       cfg.StdoutPath,
		StderrPath:       cfg.StderrPath,
		NetworkIsolation: cfg.NetworkIsolation,
		Resources:        cfg.Resources.Copy(),
	}
	if !spec.user.self {
		shim, err := prepareShim(cfg.AllocDir, cfg.Name, spec.user, spec.path, spec.tmp, spec.args, spec.env)
		if err != nil {
			return nil, err
		}
		defer func() {
			if h == nil {
				shim.discard()
			}
		}()
		// The executor looks the command up in <TaskDir>/local and
		// <TaskDir> first, and makes what it finds executable, as root:
		// a task could plant a symlink there. It gets a TaskDir below
		// /proc, where no one can make anything, with the names it
		// derives the task's v1 cgroups from (alloc ID, task name); the
		// task still runs in its task dir (WorkDir).
		command.Cmd, command.Args, command.Env = shim.cmd, shim.args, shimEnv
		command.TaskDir = filepath.Join(noTaskDir, filepath.Base(filepath.Dir(spec.dir)), filepath.Base(spec.dir))
		command.WorkDir = spec.dir
	}
	if spec.fence != nil {
		if err := spec.fence.apply(); err != nil {
			d.unfence(logger, cfg)
			return nil, err
		}
	}
	exec, client, err := executor.CreateExecutor(logger, nomadCfg, execCfg)
	if err != nil {
		d.unfence(logger, cfg)
		return nil, fmt.Errorf("start executor: %w", err)
	}
	if spec.fence != nil {
		pid := 0
		if rc := client.ReattachConfig(); rc != nil {
			pid = rc.Pid
		}
		if err := spec.fence.enter(pid); err != nil {
			client.Kill()
			d.unfence(logger, cfg)
			return nil, err
		}
	}
	ps, err := exec.Launch(command)
	if err != nil {
		client.Kill()
		d.unfence(logger, cfg)
		return nil, fmt.Errorf("launch %s: %w", spec.path, err)
	}
	h = &taskHandle{
		logger:       logger.With("pid", ps.Pid),
		cfg:          cfg,
		exec:         exec,
		pluginClient: client,
		pid:          ps.Pid,
		user:         spec.user.name,
		who:          spec.user,
		startedAt:    time.Now(),
		done:         make(chan struct{}),
		state:        drivers.TaskStateRunning,
	}
	return h, nil
}

// noTaskDir is below /proc, where no file can be made: the executor's
// TaskDir for a task the shim starts (launch).
const noTaskDir = "/proc/themis-no-task-dir"

// executorLog is where a task's executor logs: in the alloc dir, root's,
// not in the task dir, which is the task's (the executor opens it as root,
// following symlinks: a task could point it at any file).
func executorLog(cfg *drivers.TaskConfig) string {
	if cfg.AllocDir == "" {
		return filepath.Join(cfg.TaskDir().Dir, "executor.out")
	}
	return filepath.Join(cfg.AllocDir, ".themis-"+url.PathEscape(cfg.Name)+".executor.out")
}

// unfence removes the v1 devices cgroup the driver made for a task, once
// its processes are gone (waiting up to 2 s for them); it logs what it
// cannot remove.
func (d *Driver) unfence(logger hclog.Logger, cfg *drivers.TaskConfig) {
	if err := removeDeviceCgroupV1(cfg, 2*time.Second); err != nil {
		logger.Warn("cannot remove the task's devices cgroup", "error", err)
	}
}

// reattach re-attaches to the executor of a task started before a driver
// restart.
func (d *Driver) reattach(logger hclog.Logger, st taskState) (*taskHandle, error) {
	if st.ReattachConfig == nil {
		return nil, fmt.Errorf("driver state has no executor to re-attach to (a task of an older driver)")
	}
	rc, err := pstructs.ReattachConfigToGoPlugin(st.ReattachConfig)
	if err != nil {
		return nil, fmt.Errorf("executor reattach config: %w", err)
	}
	d.mu.RLock()
	compute := d.compute
	d.mu.RUnlock()
	exec, client, err := executor.ReattachToExecutor(rc, logger, compute)
	if err != nil {
		return nil, fmt.Errorf("re-attach to executor: %w", err)
	}
	return &taskHandle{
		logger:       logger.With("pid", st.Pid),
		cfg:          st.TaskConfig,
		exec:         exec,
		pluginClient: client,
		pid:          st.Pid,
		user:         st.User,
		startedAt:    st.StartedAt,
		recovered:    true,
		done:         make(chan struct{}),
		state:        drivers.TaskStateRunning,
	}, nil
}

// defaultDriverConfig stands in for the agent's driver config when the
// driver runs without an agent (tests): the executor needs the node's CPU
// topology.
func defaultDriverConfig() *base.ClientDriverConfig {
	return &base.ClientDriverConfig{
		Topology:      numalib.Scan(numalib.PlatformScanners(false)),
		ClientMinPort: executor.ExecutorDefaultMinPort,
		ClientMaxPort: executor.ExecutorDefaultMaxPort,
	}
}

// cgroupsMode names the client's cgroups mode for the fingerprint.
func cgroupsMode() string {
	switch cgroupslib.GetMode() {
	case cgroupslib.CG1:
		return "v1"
	case cgroupslib.CG2:
		return "v2"
	default:
		return "off"
	}
}

// isolation is what the executor and the driver can do for tasks on this
// client.
type isolation struct {
	cgroups string // "v1", "v2" or "off"
	limits  bool   // cpu and memory limits are applied
	users   bool   // tasks run as their user
	devices bool   // tasks are fenced to their device files (device_fence.go)
	why     string // why not, when limits, users or devices is false
}

// currentIsolation: the executor applies cgroup limits only when the driver
// runs as root with cgroups on, and only root can run tasks as another
// user or fence their devices.
func currentIsolation() isolation {
	iso := isolation{cgroups: cgroupsMode(), users: os.Geteuid() == 0}
	iso.limits = iso.users && iso.cgroups != "off"
	devices, why := deviceIsolation()
	iso.devices = devices
	switch {
	case !iso.users:
		iso.why = "the driver does not run as root: tasks run as its user, without cpu and memory limits, and can open every GPU's device file"
	case !iso.limits:
		iso.why = "cgroups are off on this client: tasks run without cpu and memory limits, and can open every GPU's device file"
	case !iso.devices:
		iso.why = "tasks can open every GPU's device file: " + why
	}
	return iso
}

// describe is the fingerprint's health description.
func (iso isolation) describe() string {
	if iso.why == "" {
		return drivers.DriverHealthy
	}
	return drivers.DriverHealthy + "; " + iso.why
}
