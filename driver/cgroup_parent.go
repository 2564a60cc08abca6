package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/client/lib/idset"
	"github.com/hashicorp/nomad/client/lib/numalib/hw"
)

// The Nomad client makes its cgroup parents when it starts (cgroupslib.Init:
// /nomad under the freezer, memory, cpu and cpuset controllers on cgroups v1,
// with the cpuset's share and reserve partitions; nomad.slice with them on
// v2), and Nomad's executor needs them: on v1 it moves itself back into
// /nomad after starting the task ("open /sys/fs/cgroup/freezer/nomad/
// cgroup.procs: no such file or directory" without it), on v2 it starts the
// task in a cgroup under nomad.slice. A host where no client has run has
// none, nor has one whose parents an operator removed. The driver makes
// them the way the client does when they are missing (and, on v1, the
// devices controller's /nomad, under which it fences each task's device
// files: devices.go), and reports unhealthy, saying why, when it cannot.

// nomadCgroupParentDirs are the cgroup directories of the Nomad client's
// parent named parent that the executor needs, outermost first (none where
// cgroups are off).
func nomadCgroupParentDirs(mode cgroupslib.Mode, parent string) []string {
	root := cgroupslib.GetDefaultRoot()
	switch mode {
	case cgroupslib.CG1:
		return []string{
			filepath.Join(root, "freezer", parent),
			filepath.Join(root, "memory", parent),
			filepath.Join(root, "cpu", parent),
			filepath.Join(root, "cpuset", parent),
			filepath.Join(root, "cpuset", parent, cgroupslib.SharePartition()),
			filepath.Join(root, "cpuset", parent, cgroupslib.ReservePartition()),
		}
	case cgroupslib.CG2:
		return []string{
			filepath.Join(root, parent),
			filepath.Join(root, parent, cgroupslib.SharePartition()),
			filepath.Join(root, parent, cgroupslib.ReservePartition()),
		}
	default:
		return nil
	}
}

// cgroupParentDirs are nomadCgroupParentDirs plus, on v1 with the devices
// controller mounted, the devices parent the driver fences tasks' device
// files under (devices.go).
func cgroupParentDirs(mode cgroupslib.Mode, parent string) []string {
	dirs := nomadCgroupParentDirs(mode, parent)
	if mode == cgroupslib.CG1 {
		if _, err := os.Stat(devicesControllerV1()); err == nil {
			dirs = append(dirs, filepath.Join(devicesControllerV1(), parent))
		}
	}
	return dirs
}

// devicesControllerV1 is where the v1 devices controller is mounted.
func devicesControllerV1() string {
	return filepath.Join(cgroupslib.GetDefaultRoot(), "devices")
}

// missing lists the dirs that are not there as directories.
func missing(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// missingCgroupParents lists the cgroup parent dirs (cgroupParentDirs) that
// do not exist, outermost first.
func missingCgroupParents() []string {
	return missing(cgroupParentDirs(cgroupslib.GetMode(), cgroupslib.NomadCgroupParent))
}

// ensureCgroupParents makes the cgroup parents that are missing. The
// Nomad client's are made as the client makes them: its own
// cgroupslib.Init, then the cpuset partitions' cores (cores: those the
// client may use; the client writes them when it places its first
// allocation); this only where one of them is missing, so a running
// client's partitions are never rewritten. The v1 devices parent is a
// plain directory. It does nothing where cgroups are off or the driver is
// not root (the executor applies no cgroups then).
func ensureCgroupParents(logger hclog.Logger, cores *idset.Set[hw.CoreID]) error {
	if os.Geteuid() != 0 || cgroupslib.GetMode() == cgroupslib.OFF {
		return nil
	}
	mode, parent := cgroupslib.GetMode(), cgroupslib.NomadCgroupParent
	if gone := missing(nomadCgroupParentDirs(mode, parent)); len(gone) > 0 {
		if cores == nil || cores.Empty() {
			return fmt.Errorf("cgroup parent %s is missing, and the driver does not know the client's cores to make it with", gone[0])
		}
		logger.Info("the Nomad client's cgroup parents are missing (no client has run on this host, or they were removed); making them as the client does",
			"missing", gone, "cores", cores.String())
		if err := cgroupslib.Init(logger, cores.String()); err != nil {
			return fmt.Errorf("cgroup parent %s is missing and cannot be made: %w", gone[0], err)
		}
		if err := cgroupslib.GetPartition(logger, cores).Reserve(idset.Empty[hw.CoreID]()); err != nil {
			return fmt.Errorf("cgroup parent %s: %w", gone[0], err)
		}
	}
	for _, d := range missingCgroupParents() {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup parent %s is missing and cannot be made: %w", d, err)
		}
	}
	return nil
}

// ensureCgroupParents makes the cgroup parents with the cores the agent
// lets the client use.
func (d *Driver) ensureCgroupParents() error {
	d.mu.RLock()
	topo := d.nomadConfig.Topology
	d.mu.RUnlock()
	var cores *idset.Set[hw.CoreID]
	if topo != nil {
		cores = topo.UsableCores()
	}
	return ensureCgroupParents(d.logger, cores)
}
