package devstack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// reaperHelperEnv makes this test binary the process that gets killed: it
// starts an "agent" (a shell) through spawnLog, the agent starts a child of
// its own (as a Nomad agent starts its plugins and logmon), and it waits to
// be killed.
const reaperHelperEnv = "DEVSTACK_REAPER_HELPER_DIR"

func TestReaperHelper(t *testing.T) {
	dir := os.Getenv(reaperHelperEnv)
	if dir == "" {
		t.Skip("helper process of TestKilledParentLeavesNoOrphans")
	}
	s := &Stack{cfg: Config{DataDir: dir, Log: hclog.NewNullLogger()}}
	// A plugin (in the agent's group) and an executor (a session of its
	// own, naming a file in the data dir, as Nomad's executors do) with
	// its task.
	executor := `sleep 300 & echo $! > ` + filepath.Join(dir, "task.pid") + `; wait`
	script := `setsid /bin/sh -c '` + executor + `' executor '{"LogFile":"` + filepath.Join(dir, "alloc", "x.log") + `"}' &
sleep 300 & echo $! > ` + filepath.Join(dir, "plugin.pid") + `.tmp; mv ` +
		filepath.Join(dir, "plugin.pid") + `.tmp ` + filepath.Join(dir, "plugin.pid") + `; wait`
	if err := s.spawn("agent", "/bin/sh", "-c", script); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "reaper.pid"), []byte(strconv.Itoa(ReaperPid())), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Minute)
}

// A process that started agents and is then killed with SIGKILL (kill -9
// of `themis dev`) leaves none of the agents' children behind: the agent
// dies of Pdeathsig, and the reaper kills what it started (its plugins,
// re-parented to init, and the sessions of the executors of its data dir
// with their tasks), and then exits.
func TestKilledParentLeavesNoOrphans(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReaperHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), reaperHelperEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var plugin, task, reaperPid int
	deadline := time.Now().Add(30 * time.Second)
	for plugin == 0 || task == 0 || reaperPid == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the helper did not start its agent and the agent's child in 30 s")
		}
		time.Sleep(50 * time.Millisecond)
		plugin = readPid(filepath.Join(dir, "plugin.pid"))
		task = readPid(filepath.Join(dir, "task.pid"))
		reaperPid = readPid(filepath.Join(dir, "reaper.pid"))
	}
	if !alive(plugin) || !alive(task) || !alive(reaperPid) {
		t.Fatalf("the agent's child (%d), the task (%d) or the reaper (%d) is not running", plugin, task, reaperPid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for alive(plugin) || alive(task) || alive(reaperPid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(plugin, syscall.SIGKILL)
			_ = syscall.Kill(task, syscall.SIGKILL)
			t.Fatalf("10 s after its parent was killed: the agent's child %d alive %v, the task %d alive %v, the reaper %d alive %v",
				plugin, alive(plugin), task, alive(task), reaperPid, alive(reaperPid))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
