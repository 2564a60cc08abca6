package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/moby/sys/userns"
	"github.com/opencontainers/cgroups"
	// Sets cgroups.DevicesSetV1 and DevicesSetV2: runc's device cgroup
	// code (the v1 emulator, the v2 eBPF program).
	_ "github.com/opencontainers/cgroups/devices"
	devices "github.com/opencontainers/cgroups/devices/config"
)

// A task's device fence holds it to its allow list (devices.go) in the
// kernel, with runc's own code (github.com/opencontainers/cgroups/devices),
// so opening any other device file fails with EPERM, whatever the task's
// user or the file's mode:
//
//   - cgroups v1: Nomad gives a task no devices cgroup, so the driver makes
//     one, <devices controller>/nomad/<alloc>.<task>, sets it to deny all
//     but the list (devices.deny, devices.allow; runc checks devices.list
//     afterwards), and moves the task's executor into it before the
//     executor starts the task, which is born in it. The executor stays in
//     it (it opens no device but /dev/null) and the driver removes it when
//     the task has exited and its executor stopped, and again on
//     DestroyTask once any processes the task left are killed; the
//     fingerprint sweeps away any left over (sweepDeviceCgroupsV1).
//   - cgroups v2: the driver attaches an eBPF program of type
//     BPF_PROG_TYPE_CGROUP_DEVICE that allows only the list to the cgroup
//     the Nomad client made for the task, before the executor starts the
//     task in it (CLONE_INTO_CGROUP); the program goes with the cgroup.
//
// Where the executor applies no cgroups (the driver is not root, cgroups
// are off) or the driver runs in a user namespace, there is no fence and
// the fingerprint says so (driver.themis.device_isolation = false).

// deviceFence is one task's fence.
type deviceFence struct {
	mode  cgroupslib.Mode
	dir   string // the cgroup the rules are set on
	rules []*devices.Rule
}

// deviceIsolation says whether the driver can fence tasks' devices on this
// client, and why not.
func deviceIsolation() (ok bool, why string) {
	switch {
	case os.Geteuid() != 0:
		return false, "the driver does not run as root"
	case cgroupslib.GetMode() == cgroupslib.OFF:
		return false, "cgroups are off on this client"
	case userns.RunningInUserNS():
		return false, "the driver runs in a user namespace, where device cgroups cannot be set"
	case cgroupslib.GetMode() == cgroupslib.CG1:
		if _, err := os.Stat(filepath.Join(devicesControllerV1(), "devices.allow")); err != nil {
			return false, "the cgroups v1 devices controller is not mounted at " + devicesControllerV1()
		}
	}
	return true, ""
}

// deviceCgroupV1 is the v1 devices cgroup the driver makes for a task.
func deviceCgroupV1(cfg *drivers.TaskConfig) string {
	return filepath.Join(devicesControllerV1(), cgroupslib.NomadCgroupParent, cgroupslib.ScopeCG1(cfg.AllocID, cfg.Name))
}

// newDeviceFence is the fence of a task allowed rules; nil where the
// driver cannot fence devices on this client (deviceIsolation).
func newDeviceFence(cfg *drivers.TaskConfig, rules []*devices.Rule) (*deviceFence, error) {
	if ok, _ := deviceIsolation(); !ok {
		return nil, nil
	}
	f := &deviceFence{mode: cgroupslib.GetMode(), rules: rules}
	switch f.mode {
	case cgroupslib.CG1:
		f.dir = deviceCgroupV1(cfg)
	default:
		f.dir = statsCgroup(cfg)
		if f.dir == "" {
			return nil, errors.New("device isolation: the Nomad client gave the task no cgroup (resources.linux_resources.cpuset_cgroup_path) to fence its devices in")
		}
	}
	return f, nil
}

// apply sets the rules on the fence's cgroup, making it on v1.
func (f *deviceFence) apply() error {
	res := &cgroups.Resources{Devices: f.rules}
	switch f.mode {
	case cgroupslib.CG1:
		if err := os.Mkdir(f.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("device isolation: make devices cgroup %s: %w", f.dir, err)
		}
		if err := cgroups.DevicesSetV1(f.dir, res); err != nil {
			return fmt.Errorf("device isolation: set devices cgroup %s: %w", f.dir, err)
		}
	default:
		if err := cgroups.DevicesSetV2(f.dir, res); err != nil {
			return fmt.Errorf("device isolation: attach the eBPF device program to cgroup %s: %w", f.dir, err)
		}
	}
	return nil
}

// enter puts the task's executor, which has not started the task yet, in
// the fence (v1; on v2 the executor starts the task in the fenced cgroup).
func (f *deviceFence) enter(executorPid int) error {
	if f.mode != cgroupslib.CG1 {
		return nil
	}
	if executorPid <= 0 {
		return fmt.Errorf("device isolation: no executor pid to move into %s", f.dir)
	}
	if err := cgroups.WriteCgroupProc(f.dir, executorPid); err != nil {
		return fmt.Errorf("device isolation: move the executor (pid %d) into %s: %w", executorPid, f.dir, err)
	}
	return nil
}

// removeDeviceCgroupV1 removes the v1 devices cgroup the driver made for a
// task, once its processes are gone: the kernel refuses while any is in
// it, so it tries again for up to wait. Nothing where there is none (v2,
// no fence, removed already).
func removeDeviceCgroupV1(cfg *drivers.TaskConfig, wait time.Duration) error {
	if cgroupslib.GetMode() != cgroupslib.CG1 {
		return nil
	}
	dir := deviceCgroupV1(cfg)
	deadline := time.Now().Add(wait)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove devices cgroup %s: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond) // exited processes leave the cgroup a moment later
	}
}

// deviceFiles is what the task-start log says of a task's device files:
// the reserved ones, and whether they are fenced.
func deviceFiles(reserved []*drivers.DeviceConfig, f *deviceFence) string {
	var paths []string
	for _, d := range reserved {
		if d != nil {
			paths = append(paths, d.HostPath)
		}
	}
	if f == nil {
		return fmt.Sprintf("%v (not fenced: %s)", paths, deviceIsolationWhy())
	}
	return fmt.Sprintf("%v (fenced, cgroups %s)", paths, cgroupsMode())
}

// deviceIsolationWhy is why the driver cannot fence devices ("" if it can).
func deviceIsolationWhy() string {
	_, why := deviceIsolation()
	return why
}

// sweepDeviceCgroupsV1 removes the v1 devices cgroups of tasks that are
// over: empty ones whose task's freezer cgroup, which the Nomad client
// makes before it starts a task and removes once its processes are gone,
// no longer exists. They are left where the driver process ended before
// its task did (a client shut down just after a task ended). The devices
// parent is shared by every Nomad client on the node, so a cgroup whose
// task may still start or run is never touched. It returns what it
// removed.
func sweepDeviceCgroupsV1() []string {
	if cgroupslib.GetMode() != cgroupslib.CG1 {
		return nil
	}
	parent := filepath.Join(devicesControllerV1(), cgroupslib.NomadCgroupParent)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	freezer := filepath.Join(cgroupslib.GetDefaultRoot(), "freezer", cgroupslib.NomadCgroupParent)
	var removed []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(freezer, e.Name())); !errors.Is(err, os.ErrNotExist) {
			continue // the task's cgroups are the client's still
		}
		dir := filepath.Join(parent, e.Name())
		if os.Remove(dir) == nil { // the kernel refuses while any process is in it
			removed = append(removed, dir)
		}
	}
	return removed
}
