package driver

import (
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/plugins/drivers"
)

// The executor does not tell whether the kernel's OOM killer ended a task
// (its ProcessState.OOMKilled stays false on Linux), so the driver reads the
// task's memory cgroup itself when the process was killed by a signal:
// Nomad then records the exit as "OOM Killed".

// statsCgroup is the cgroup the executor put the task in ("" for none).
func statsCgroup(cfg *drivers.TaskConfig) string {
	return (&executor.ExecCommand{TaskDir: cfg.TaskDir().Dir, Resources: cfg.Resources}).StatsCgroup()
}

// oomKilled reports whether the kernel's OOM killer killed a process in the
// task's memory cgroup.
func oomKilled(cgroup string) bool {
	if cgroup == "" {
		return false
	}
	switch cgroupslib.GetMode() {
	case cgroupslib.CG1:
		s, err := cgroupslib.OpenFromFreezerCG1(cgroup, "memory").Read("memory.oom_control")
		return err == nil && oomKills(s) > 0
	case cgroupslib.CG2:
		s, err := cgroupslib.OpenPath(cgroup).Read("memory.events")
		return err == nil && oomKills(s) > 0
	default:
		return false
	}
}

// oomKills reads the "oom_kill N" line of memory.oom_control (v1) or
// memory.events (v2).
func oomKills(s string) int {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
