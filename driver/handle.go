package driver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	cstructs "github.com/hashicorp/nomad/client/structs"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/plugins/drivers"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"
	"golang.org/x/sys/unix"
)

// killWait bounds how long the driver waits for the executor to report a
// killed process gone.
const killWait = 20 * time.Second

// taskState is stored in the TaskHandle's DriverState so that RecoverTask can
// re-attach to the task's executor.
type taskState struct {
	TaskConfig     *drivers.TaskConfig
	ReattachConfig *pstructs.ReattachConfig
	Pid            int
	StartedAt      time.Time
	// User is the user the task runs as ("" = the driver's own user).
	User string
	// RunAs is who the task runs as, ids included (nil: a task of a
	// driver from before the run-as shim).
	RunAs *runAsState
	// The task's part in the checkpoint protocol. The TaskConfig above
	// keeps no driver config (it is not encoded), so RecoverTask needs
	// these.
	CheckpointDir    string
	CheckpointRoot   string
	CheckpointNames  []string
	GracePeriod      time.Duration
	CheckpointSignal string
}

// runAsState is a taskUser as the driver state keeps it.
type runAsState struct {
	Name     string
	UID, GID int
	Groups   []int
	Home     string
	Dynamic  bool
	Self     bool
}

func stateOf(u taskUser) *runAsState {
	return &runAsState{Name: u.name, UID: u.uid, GID: u.gid, Groups: u.groups, Home: u.home, Dynamic: u.dynamic, Self: u.self}
}

// user is the taskUser of a state; a nil state (a task of an older
// driver) is root's, as the driver then worked in its checkpoint dir.
func (s *runAsState) user() taskUser {
	if s == nil {
		return taskUser{}
	}
	return taskUser{name: s.Name, uid: s.UID, gid: s.GID, groups: s.Groups, home: s.Home, dynamic: s.Dynamic, self: s.Self}
}

// taskHandle tracks one task: its executor and the process the executor
// runs, which leads its own process group.
type taskHandle struct {
	logger       hclog.Logger
	cfg          *drivers.TaskConfig
	exec         executor.Executor
	pluginClient *plugin.Client
	pid          int
	user         string
	// who is who the task runs as; its dynamic uid, if any, is released
	// when the task is destroyed (identity.go).
	who       taskUser
	startedAt time.Time
	recovered bool
	proto     protocol
	done      chan struct{} // closed once the process has exited
	// stopped stops the executor once: run stops it after reporting the
	// exit, DestroyTask waits for that (go-plugin's Kill must not run
	// twice at once).
	stopped sync.Once
	// detached is set when another driver process took the task over (a
	// plugin restart): this handle must leave the executor to it.
	detached atomic.Bool

	mu          sync.Mutex
	state       drivers.TaskState
	completedAt time.Time
	exit        *drivers.ExitResult
}

// run waits for the executor to report the process's exit, reports it, then
// stops the executor. The exit status is the process's own, also after a
// driver restart (the executor is its parent, not the driver). The exit is
// reported first because stopping a re-attached executor takes up to a
// second or more: go-plugin learns that a process it did not start has
// exited by polling its pid once a second.
func (h *taskHandle) run() {
	ps, err := h.exec.Wait(context.Background())
	res := &drivers.ExitResult{}
	if err != nil {
		res.Err = fmt.Errorf("executor: %w", err)
	} else {
		res.ExitCode, res.Signal, res.OOMKilled = ps.ExitCode, ps.Signal, ps.OOMKilled
		if res.Signal == int(syscall.SIGKILL) && !res.OOMKilled {
			res.OOMKilled = oomKilled(statsCgroup(h.cfg))
		}
	}
	if h.detached.Load() {
		return // the driver that re-attached to the executor owns it now
	}
	h.finish(res)
	h.stopExecutor()
	// The executor was the last of the task's v1 devices cgroup unless
	// the task left processes behind, which DestroyTask kills, removing
	// the cgroup then. Removed here too, as Nomad does not always call
	// DestroyTask (a client shutting down right after a task ends).
	_ = removeDeviceCgroupV1(h.cfg, 0)
}

// stopExecutor stops the task's executor and waits until it has, however
// many callers ask at once.
func (h *taskHandle) stopExecutor() {
	h.stopped.Do(h.pluginClient.Kill)
}

func (h *taskHandle) finish(res *drivers.ExitResult) {
	h.mu.Lock()
	h.state = drivers.TaskStateExited
	if res.Err != nil {
		h.state = drivers.TaskStateUnknown
	}
	h.completedAt = time.Now()
	h.exit = res
	h.mu.Unlock()
	h.logger.Info("task process exited", "exit_code", res.ExitCode, "signal", res.Signal, "oom_killed", res.OOMKilled, "error", res.Err)
	close(h.done)
	if h.proto.checkpointDir != "" {
		h.proto.prune(h.logger)
	}
}

func (h *taskHandle) running() bool {
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

func (h *taskHandle) exitResult() *drivers.ExitResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.exit.Copy()
}

func (h *taskHandle) status() *drivers.TaskStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &drivers.TaskStatus{
		ID:          h.cfg.ID,
		Name:        h.cfg.Name,
		State:       h.state,
		StartedAt:   h.startedAt,
		CompletedAt: h.completedAt,
		ExitResult:  h.exit.Copy(),
		DriverAttributes: map[string]string{
			"pid":       strconv.Itoa(h.pid),
			"user":      h.user,
			"recovered": strconv.FormatBool(h.recovered),
		},
	}
}

func (h *taskHandle) driverState() taskState {
	return taskState{TaskConfig: h.cfg, Pid: h.pid, StartedAt: h.startedAt, User: h.user, RunAs: stateOf(h.proto.who),
		ReattachConfig: pstructs.ReattachConfigFromGoPlugin(h.pluginClient.ReattachConfig()),
		CheckpointDir:  h.proto.checkpointDir, CheckpointRoot: h.proto.root, CheckpointNames: h.proto.names,
		GracePeriod: h.proto.grace, CheckpointSignal: h.proto.signalName}
}

// signal sends sig to the task's whole process group (the executor starts
// the command as a group leader), so that it reaches the command's children
// too; the executor's own Signal reaches the leader only.
func (h *taskHandle) signal(sig syscall.Signal) error {
	if !h.running() {
		return fmt.Errorf("task %s has exited", h.cfg.ID)
	}
	if err := unix.Kill(-h.pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %s to process group %d: %w", unix.SignalName(sig), h.pid, err)
	}
	return nil
}

// stop sends sig to the process group, waits until the process exits or the
// deadline passes, then kills the process group. killed reports the latter.
func (h *taskHandle) stop(sig syscall.Signal, deadline time.Time) (killed bool, err error) {
	if !h.running() {
		return false, nil
	}
	if sig == syscall.SIGKILL {
		return true, h.kill()
	}
	h.logger.Info("stopping task", "signal", unix.SignalName(sig), "deadline", deadline.Format(time.RFC3339Nano))
	if err := h.signal(sig); err != nil && h.running() {
		return false, err
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-h.done:
		return false, nil
	case <-t.C:
	}
	h.logger.Warn("task did not exit by its deadline; killing its process group", "deadline", deadline.Format(time.RFC3339Nano))
	return true, h.kill()
}

// kill has the executor kill the process and its process group, and waits
// for the exit to be reported.
func (h *taskHandle) kill() error {
	if !h.running() {
		return nil
	}
	if err := h.exec.Shutdown("SIGKILL", 0); err != nil && h.running() {
		// The executor is gone (say, killed with the client): kill the
		// group ourselves.
		h.logger.Warn("executor shutdown failed; killing the process group directly", "error", err)
		if kerr := unix.Kill(-h.pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, unix.ESRCH) {
			return fmt.Errorf("kill task %s: %w", h.cfg.ID, errors.Join(err, kerr))
		}
	}
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-h.done:
		return nil
	case <-t.C:
		return fmt.Errorf("task %s (pid %d) still running after SIGKILL", h.cfg.ID, h.pid)
	}
}

// reapGroup kills what is left of the process group after its leader has
// exited (say, a data loader the trainer forked), so that nothing of a task
// outlives it on the GPUs. While any member lives the kernel does not reuse
// the group ID, so only the task's own processes can be hit.
func (h *taskHandle) reapGroup() {
	if h.running() {
		return
	}
	if pids := groupMembers(h.pid); len(pids) > 0 {
		h.logger.Info("killing processes left in the task's process group", "pids", pids)
		if err := unix.Kill(-h.pid, syscall.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			h.logger.Warn("cannot kill the task's process group", "error", err)
		}
	}
}

// stats streams the executor's resource usage of the task.
func (h *taskHandle) stats(ctx context.Context, interval time.Duration) (<-chan *cstructs.TaskResourceUsage, error) {
	if interval <= 0 {
		interval = time.Second
	}
	return h.exec.Stats(ctx, interval)
}
