package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cpustats"
	cstructs "github.com/hashicorp/nomad/client/structs"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"
)

// recoverPollInterval is how often a re-adopted process, which is not our
// child and so cannot be waited for, is checked for exit.
const recoverPollInterval = 500 * time.Millisecond

// errExitUnknown is the ExitResult error of a re-adopted process: once the
// driver has restarted, the process is no longer its child and its exit
// status cannot be read.
var errExitUnknown = errors.New("exit status unknown: the process was re-adopted after a driver restart and is not the driver's child")

// taskState is stored in the TaskHandle's DriverState so that RecoverTask can
// find the process again.
type taskState struct {
	TaskConfig *drivers.TaskConfig
	Pid        int
	// ProcStartTime is field 22 of /proc/<pid>/stat: with Pid it identifies
	// the process even if the pid is reused.
	ProcStartTime uint64
	StartedAt     time.Time
	// The task's part in the checkpoint protocol. The TaskConfig above
	// keeps no driver config (it is not encoded), so RecoverTask needs
	// these. Empty in the state of a driver before the protocol.
	CheckpointDir    string
	GracePeriod      time.Duration
	CheckpointSignal string
}

// taskHandle tracks one running process, which leads its own process group.
type taskHandle struct {
	logger        hclog.Logger
	cfg           *drivers.TaskConfig
	pid           int
	procStartTime uint64
	startedAt     time.Time
	recovered     bool
	proto         protocol
	done          chan struct{} // closed once the process has exited

	mu          sync.Mutex
	state       drivers.TaskState
	completedAt time.Time
	exit        *drivers.ExitResult
}

// startProcess runs argv in dir with env as the leader of a new process
// group, its stdout/stderr written straight into the given files so that the
// process keeps logging if the driver restarts.
func startProcess(logger hclog.Logger, cfg *drivers.TaskConfig, proto protocol, path string, args []string, dir string, env []string, stdout, stderr *os.File) (*taskHandle, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	h := &taskHandle{
		logger:    logger.With("pid", cmd.Process.Pid),
		cfg:       cfg,
		proto:     proto,
		pid:       cmd.Process.Pid,
		startedAt: time.Now(),
		done:      make(chan struct{}),
		state:     drivers.TaskStateRunning,
	}
	if st, err := readProcStat(h.pid); err == nil {
		h.procStartTime = st.StartTime
	} else {
		h.logger.Warn("cannot read process start time; the task will not survive a driver restart", "error", err)
	}
	go h.wait(cmd, stdout, stderr)
	return h, nil
}

func (h *taskHandle) wait(cmd *exec.Cmd, closers ...io.Closer) {
	err := cmd.Wait()
	for _, c := range closers {
		_ = c.Close()
	}
	res := &drivers.ExitResult{}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws, ok := ee.Sys().(syscall.WaitStatus)
		switch {
		case ok && ws.Signaled():
			res.Signal = int(ws.Signal())
			res.ExitCode = 128 + res.Signal
		default:
			res.ExitCode = ee.ExitCode()
		}
	default:
		res.Err = err
	}
	h.finish(res)
}

// adopt polls a process that survived a driver restart until it is gone.
func (h *taskHandle) adopt() {
	t := time.NewTicker(recoverPollInterval)
	defer t.Stop()
	for range t.C {
		if !processAlive(h.pid, h.procStartTime) {
			h.finish(&drivers.ExitResult{Err: errExitUnknown})
			return
		}
	}
}

func (h *taskHandle) finish(res *drivers.ExitResult) {
	h.mu.Lock()
	h.state = drivers.TaskStateExited
	h.completedAt = time.Now()
	h.exit = res
	h.mu.Unlock()
	h.logger.Info("task process exited", "exit_code", res.ExitCode, "signal", res.Signal, "error", res.Err)
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
			"recovered": strconv.FormatBool(h.recovered),
		},
	}
}

func (h *taskHandle) driverState() taskState {
	return taskState{TaskConfig: h.cfg, Pid: h.pid, ProcStartTime: h.procStartTime, StartedAt: h.startedAt,
		CheckpointDir: h.proto.checkpointDir, GracePeriod: h.proto.grace, CheckpointSignal: h.proto.signalName}
}

// signal sends sig to the task's whole process group, so that it reaches
// the children of the command too.
func (h *taskHandle) signal(sig syscall.Signal) error {
	if !h.running() {
		return fmt.Errorf("task %s has exited", h.cfg.ID)
	}
	if h.recovered && !processAlive(h.pid, h.procStartTime) {
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

// kill sends SIGKILL to the process group and waits for the leader to go.
func (h *taskHandle) kill() error {
	if err := h.signal(syscall.SIGKILL); err != nil && h.running() {
		return err
	}
	t := time.NewTimer(5*time.Second + recoverPollInterval)
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
// the group ID, so only our own processes can be hit.
func (h *taskHandle) reapGroup() {
	if h.running() {
		return
	}
	if u, ok := readGroupUsage(h.pid); ok {
		h.logger.Info("killing processes left in the task's process group", "pids", u.Pids)
		if err := unix.Kill(-h.pid, syscall.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			h.logger.Warn("cannot kill the task's process group", "error", err)
		}
	}
}

// stats streams the resource usage of the process group every interval.
// CPU is reported in percent of one core and, when the agent told the driver
// the node's compute, in MHz (TotalTicks) as Nomad shows it.
func (h *taskHandle) stats(ctx context.Context, interval time.Duration, compute cpustats.Compute, ch chan<- *cstructs.TaskResourceUsage) {
	defer close(ch)
	if interval <= 0 {
		interval = time.Second
	}
	var prev groupUsage
	var prevAt time.Time
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.done:
			return
		case <-t.C:
			t.Reset(interval)
		}
		now := time.Now()
		u, ok := readGroupUsage(h.pid)
		if !ok {
			continue
		}
		var userPct, sysPct float64
		if !prevAt.IsZero() {
			wall := now.Sub(prevAt).Seconds() * clockTicks
			if wall > 0 {
				userPct = 100 * float64(sub(u.UTicks, prev.UTicks)) / wall
				sysPct = 100 * float64(sub(u.STicks, prev.STicks)) / wall
			}
		}
		prev, prevAt = u, now
		var ticks float64
		if compute.NumCores > 0 {
			ticks = (userPct + sysPct) / 100 * float64(compute.TotalCompute) / float64(compute.NumCores)
		}
		usage := &cstructs.ResourceUsage{
			MemoryStats: &cstructs.MemoryStats{RSS: u.RSSBytes, Measured: []string{"RSS"}},
			CpuStats: &cstructs.CpuStats{
				UserMode:   userPct,
				SystemMode: sysPct,
				Percent:    userPct + sysPct,
				TotalTicks: ticks,
				Measured:   []string{"User Mode", "System Mode", "Percent"},
			},
		}
		select {
		case ch <- &cstructs.TaskResourceUsage{ResourceUsage: usage, Timestamp: now.UnixNano(), Pids: pidUsage(u.Pids)}:
		case <-ctx.Done():
			return
		}
	}
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0 // a group member exited and took its CPU time with it
	}
	return a - b
}

// pidUsage reports each group member's RSS (CPU is reported for the group).
func pidUsage(pids []int) map[string]*cstructs.ResourceUsage {
	out := make(map[string]*cstructs.ResourceUsage, len(pids))
	for _, p := range pids {
		st, err := readProcStat(p)
		if err != nil {
			continue
		}
		out[strconv.Itoa(p)] = &cstructs.ResourceUsage{
			MemoryStats: &cstructs.MemoryStats{RSS: st.RSSPages * uint64(os.Getpagesize()), Measured: []string{"RSS"}},
			CpuStats:    &cstructs.CpuStats{},
		}
	}
	return out
}

// parseSignal turns "SIGTERM", "TERM" or "" (SIGINT) into a signal.
func parseSignal(name string) (syscall.Signal, error) {
	if name == "" {
		return syscall.SIGINT, nil
	}
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	if s := unix.SignalNum(n); s != 0 {
		return s, nil
	}
	return 0, fmt.Errorf("unknown signal %q", name)
}
