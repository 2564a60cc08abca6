package driver

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// testMemoryMB is the memory limit of a test task that names none.
const testMemoryMB = 512

// taskCgroups gives the task its cgroups the way the Nomad client does
// before it calls StartTask: the client's cgroup parents (made at client
// start; here by the driver's ensureCgroupParents, the same way), the
// task's own cgroups (cgroupslib.Factory, removed at cleanup) and the
// resources that point the executor at them, with a memory limit of
// memoryMB. Where the executor applies no cgroups (the test is not root,
// or cgroups are off) it gives none and says why.
func taskCgroups(t *testing.T, e *testEnv, task *drivers.TaskConfig, memoryMB int64) (ok bool, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return false, "the test does not run as root, so the executor applies no cgroups"
	}
	if cgroupslib.GetMode() == cgroupslib.OFF {
		return false, "cgroups are off on this host"
	}
	must.NoError(t, e.d.ensureCgroupParents())
	life := cgroupslib.Factory(task.AllocID, task.Name, false)
	must.NoError(t, life.Setup())
	t.Cleanup(func() {
		_ = life.Kill()
		for i := 0; i < 50 && life.Teardown() != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		// The driver's v1 devices cgroup, should a failed test not
		// have destroyed the task.
		_ = removeDeviceCgroupV1(task, 2*time.Second)
	})
	task.Resources = &drivers.Resources{
		NomadResources: &structs.AllocatedTaskResources{
			Cpu:    structs.AllocatedCpuResources{CpuShares: 500},
			Memory: structs.AllocatedMemoryResources{MemoryMB: memoryMB},
		},
		LinuxResources: &drivers.LinuxResources{
			CPUShares:        500,
			MemoryLimitBytes: memoryMB << 20,
			CpusetCgroupPath: cgroupslib.LinuxResourcesPath(task.AllocID, task.Name, false),
		},
	}
	return true, ""
}

// A task that allocates past its memory limit is killed by the kernel, and
// the exit says OOM killed (Nomad's "OOM Killed" event).
func TestMemoryLimitEnforced(t *testing.T) {
	e := newTestEnv(t, false, nil)
	// tail buffers an endless line of /dev/zero: its memory grows until killed.
	task, tc := newTask("oom", `echo ready; exec tail /dev/zero`, spec.Stanza{GPUs: 1})
	if ok, why := taskCgroups(t, e, task, 32); !ok {
		t.Skipf("memory limits cannot be tested here: %s", why)
	}
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	res := e.wait(t, task.ID, 60*time.Second)
	must.True(t, res.OOMKilled, must.Sprintf("exit %+v: want OOM killed by the 32 MiB limit", res))
	must.Eq(t, 9, res.Signal)
}

func TestOOMKills(t *testing.T) {
	v1 := "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
	v2 := "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n"
	must.Eq(t, 2, oomKills(v1))
	must.Eq(t, 1, oomKills(v2))
	must.Eq(t, 0, oomKills(strings.ReplaceAll(v2, "oom_kill 1", "oom_kill 0")))
	must.Eq(t, 0, oomKills(""))
}
