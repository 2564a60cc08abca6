package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
)

// restartShell is the task of TestClientRestartRecoversTask: long enough to
// outlive the client's restart, with an exit code Nomad can only learn from
// the process itself.
const restartShell = "sleep 8; exit 3"

// recoveredExitLag bounds how long the recovered task's exit may take to
// reach Nomad as a Terminated event (measured from the test seeing the
// process gone, polled every 10 ms on a busy machine, so it can come out
// below zero).
const recoveredExitLag = 500 * time.Millisecond

// TestClientRestartRecoversTask restarts a Nomad client (a non-dev agent,
// with a data_dir, in a cluster of its own) while a themis task runs: the
// task keeps running, the restarted client's driver re-attaches to the
// task's executor (RecoverTask), and Nomad records the task's real exit
// code, with no second start.
//
// The server runs in an agent of its own and stays up, as in a real
// cluster. (A server restarted with its client in one process refuses the
// client's first re-registration, its keyring not being loaded yet, and
// the client retries only 15-30 s later.)
func TestClientRestartRecoversTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 4*time.Minute)
	defer cancel()
	began := time.Now()
	at := func() time.Duration { return time.Since(began).Round(time.Millisecond) }
	cluster, nomad := startRestartCluster(t, ctx)
	logHint := "client log: " + cluster.ClientLog(0) + ", server log: " + cluster.ServerLog()
	t.Logf("%s: cluster up, client pid %d", at(), cluster.ClientPid(0))

	job := trainJob{gpus: 1, shell: restartShell}.build(t, "restart-recover")
	pool, one := "default", uint64(1)
	job.NodePool = &pool // no planner pins it
	task := job.TaskGroups[0].Tasks[0]
	task.Resources.Devices = []*nomadapi.RequestedDevice{{Name: "themis/gpu", Count: &one}}
	if _, _, err := nomad.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v (%s)", *job.ID, err, logHint)
	}

	allocID := waitTaskRunning(t, nomad, *job.ID, task.Name, logHint)
	sh, executor := taskProcess(t, allocID, logHint)
	shStart, execStart := startTime(sh), startTime(executor)
	t.Cleanup(func() {
		// Left over only when the test failed before the task ended: the
		// task and its executor run in a session of their own and outlive
		// the agent. The start times guard against reused pids.
		if shStart != "" && startTime(sh) == shStart {
			_ = syscall.Kill(-sh, syscall.SIGKILL)
		}
		if execStart != "" && startTime(executor) == execStart {
			_ = syscall.Kill(executor, syscall.SIGKILL)
		}
	})
	t.Logf("%s: task runs as pid %d under executor pid %d; stopping client pid %d", at(), sh, executor, cluster.ClientPid(0))

	// The driver starts each task's executor with Setsid (the executor
	// package's isolateCommand), so the executor leads a session and
	// process group of its own: neither the agent's exit nor the end of
	// the driver plugin (which the agent stops on shutdown) reaches it, nor
	// would a signal to the agent's process group. The task is the
	// executor's child, leader of its own process group.
	if err := cluster.StopClient(0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: client stopped", at())
	if !alive(sh) {
		t.Fatalf("task process %d died with the client (%s)", sh, logHint)
	}
	if !alive(executor) {
		t.Fatalf("executor %d died with the client (%s)", executor, logHint)
	}

	if err := cluster.StartClient(ctx, 0); err != nil {
		t.Fatalf("start the client again: %v", err)
	}
	t.Logf("%s: client back as pid %d; task still running: %v", at(), cluster.ClientPid(0), alive(sh))

	exitedAt := waitGone(t, sh, shStart, time.Minute, logHint)
	a := waitAllocDone(t, nomad, allocID, logHint)
	st := a.TaskStates[task.Name]
	if a.ClientStatus != "failed" || st == nil || st.State != "dead" || !st.Failed {
		t.Fatalf("alloc %s: client status %s, task state %+v; want failed, dead and failed (%s)", allocID, a.ClientStatus, st, logHint)
	}
	var starts, exit3 int
	var lag time.Duration // from the task's exit to Nomad's Terminated event
	var events []string
	for _, e := range st.Events {
		events = append(events, e.Type+" "+e.DisplayMessage)
		switch {
		case e.Type == nomadapi.TaskStarted:
			starts++
		case e.Type == nomadapi.TaskTerminated && e.ExitCode == 3:
			exit3++
			lag = time.Unix(0, e.Time).Sub(exitedAt)
		}
	}
	if starts != 1 || exit3 != 1 || st.Restarts != 0 {
		t.Fatalf("task events: %d starts, %d Terminated with exit code 3, %d restarts; want 1, 1, 0 (%s):\n%s",
			starts, exit3, st.Restarts, logHint, strings.Join(events, "\n"))
	}
	if n := len(allocsOf(t, nomad, *job.ID)); n != 1 {
		t.Fatalf("job has %d allocations, want 1 (%s)", n, logHint)
	}
	// The exit code came through the restarted driver's RecoverTask: it
	// re-attached to the executor rather than being handed a live task.
	log, err := os.ReadFile(cluster.ClientLog(0))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte("re-attached to the task's executor after a driver restart")) {
		t.Fatalf("the restarted driver did not log re-attaching to the executor (%s)", logHint)
	}
	t.Logf("%s: recorded %s", at(), strings.Join(events, "; "))
	// The recovered task's exit reaches Nomad at once, not after the
	// driver has stopped the re-attached executor (1-2 s).
	t.Logf("task exit -> Nomad's Terminated event: %s", lag)
	if lag > recoveredExitLag {
		t.Fatalf("the recovered task's exit reached Nomad %s after the process exited; want at most %s (%s)", lag, recoveredExitLag, logHint)
	}

	// The driver stops the re-attached executor after reporting the exit:
	// none is left behind.
	waitGone(t, executor, execStart, 10*time.Second, logHint)

	// Let the client remove the alloc dir (and unmount its secrets tmpfs)
	// before the client stops for good. The API client reads the endpoint's
	// empty answer as io.EOF.
	if err := nomad.Allocations().GC(a, nil); err != nil && !errors.Is(err, io.EOF) {
		t.Logf("gc alloc %s: %v", allocID, err)
	}
}

// startRestartCluster starts the test's own non-dev Nomad cluster with the
// suite's plugins, using the suite's Consul; it is closed, and its data dir
// removed unless the test failed (or THEMIS_E2E_KEEP is set), when the test
// ends.
func startRestartCluster(t *testing.T, ctx context.Context) (*devstack.Cluster, *nomadapi.Client) {
	t.Helper()
	_, port, err := net.SplitHostPort(env.stack.ConsulAddr())
	if err != nil {
		t.Fatal(err)
	}
	consulPort, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(env.work, "restart-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := devstack.StartCluster(ctx, devstack.Config{
		NomadBin: env.nomadBin, PluginDir: env.plugins, Templates: filepath.Join(env.root, "examples", "agents"),
		Topology: filepath.Join(env.root, "examples", "topology", "dev-node.hcl"), NodeName: "dev-node",
		DataDir: dir, Ports: devstack.Ports{ConsulHTTP: consulPort}, Log: env.log.Named("restart-cluster"),
		// No planner runs this cluster: its tasks start without a lease.
		NoLeaseCheck: true,
	})
	if err != nil {
		t.Fatalf("start a non-dev Nomad cluster: %v", err)
	}
	t.Cleanup(func() {
		cluster.Close()
		if !t.Failed() && os.Getenv("THEMIS_E2E_KEEP") == "" {
			os.RemoveAll(dir)
		}
	})
	cfg := nomadapi.DefaultConfig()
	cfg.Address = cluster.NomadAddr()
	nomad, err := nomadapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cluster, nomad
}

func allocsOf(t *testing.T, nomad *nomadapi.Client, job string) []*nomadapi.AllocationListStub {
	t.Helper()
	as, _, err := nomad.Jobs().Allocations(job, true, nil)
	if err != nil {
		t.Fatalf("allocations of %s: %v", job, err)
	}
	return as
}

// waitTaskRunning waits until the job's task runs and returns its alloc.
func waitTaskRunning(t *testing.T, nomad *nomadapi.Client, job, task, logHint string) string {
	t.Helper()
	var id string
	eventually(t, 60*time.Second, job+" to run ("+logHint+")", func() (bool, error) {
		as, _, err := nomad.Jobs().Allocations(job, true, nil)
		if err != nil {
			return false, err
		}
		for _, a := range as {
			if st := a.TaskStates[task]; st != nil && st.State == "running" {
				id = a.ID
				return true, nil
			}
			if a.ClientStatus != "pending" {
				return false, fmt.Errorf("alloc %s is %s: %s", a.ID, a.ClientStatus, a.ClientDescription)
			}
		}
		return false, fmt.Errorf("%d allocations, none running", len(as))
	})
	return id
}

// waitAllocDone waits until the server has the alloc terminal.
func waitAllocDone(t *testing.T, nomad *nomadapi.Client, id, logHint string) *nomadapi.Allocation {
	t.Helper()
	return waitAllocDoneWithin(t, nomad, id, logHint, 60*time.Second)
}

// waitAllocDoneWithin is waitAllocDone for allocations that run longer.
func waitAllocDoneWithin(t *testing.T, nomad *nomadapi.Client, id, logHint string, within time.Duration) *nomadapi.Allocation {
	t.Helper()
	var done *nomadapi.Allocation
	eventually(t, within, "alloc "+id+" to end ("+logHint+")", func() (bool, error) {
		a, _, err := nomad.Allocations().Info(id, nil)
		if err != nil {
			return false, err
		}
		if a.ClientStatus == "complete" || a.ClientStatus == "failed" {
			done = a
			return true, nil
		}
		return false, fmt.Errorf("client status %s", a.ClientStatus)
	})
	return done
}

// taskProcess finds the task's shell by its alloc ID in its environment and
// command line, and the executor that is its parent.
func taskProcess(t *testing.T, allocID, logHint string) (sh, executor int) {
	t.Helper()
	want := []byte("/bin/sh\x00-c\x00" + restartShell + "\x00")
	marker := []byte("NOMAD_ALLOC_ID=" + allocID + "\x00")
	eventually(t, 10*time.Second, "the task's process", func() (bool, error) {
		dirs, err := os.ReadDir("/proc")
		if err != nil {
			return false, err
		}
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if !bytes.Equal(cmd, want) {
				continue
			}
			if envs, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); bytes.Contains(envs, marker) {
				sh = pid
				return true, nil
			}
		}
		return false, fmt.Errorf("no process runs %q for alloc %s (%s)", restartShell, allocID, logHint)
	})
	executor = parentOf(t, sh)
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", executor))
	if args := strings.Split(string(cmd), "\x00"); len(args) < 2 || args[1] != "executor" {
		t.Fatalf("the task's parent %d is not an executor: %q (%s)", executor, cmd, logHint)
	}
	return sh, executor
}

// waitGone polls until the process pid (started at start) has exited (a
// zombie counts as gone), and returns when it saw it gone.
func waitGone(t *testing.T, pid int, start string, within time.Duration, logHint string) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for alive(pid) && startTime(pid) == start {
		if time.Now().After(deadline) {
			t.Fatalf("task process %d still runs after %s (%s)", pid, within, logHint)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Now()
}

// procStat returns the fields of /proc/<pid>/stat after the command name,
// starting with the state; nil when there is no such process.
func procStat(pid int) []string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	f := procStat(pid)
	if len(f) < 2 {
		t.Fatalf("process %d is gone", pid)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("parse /proc/%d/stat: %v", pid, err)
	}
	return ppid
}

// startTime is the process's start time in clock ticks since boot ("" when
// it is gone), which tells a process from a later one with the same pid.
func startTime(pid int) string {
	if f := procStat(pid); len(f) > 19 {
		return f[19]
	}
	return ""
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	f := procStat(pid)
	return len(f) > 0 && f[0] != "Z"
}
