package driver

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/nomad/plugins/drivers"
	devices "github.com/opencontainers/cgroups/devices/config"
	rdevices "github.com/opencontainers/runc/libcontainer/devices"
	"github.com/opencontainers/runc/libcontainer/specconv"
)

// Which device files a task may open: its device cgroup's allow list, as
// Nomad's exec driver builds it for its libcontainer tasks
// (drivers/shared/executor/executor_linux_cgo.go) and the NVIDIA container
// toolkit for containers:
//
//   - runc's default list (specconv.AllowedDevices): /dev/null, zero, full,
//     random, urandom, tty, ptmx, /dev/pts/*, /dev/net/tun, and mknod (which
//     opens nothing);
//   - the device files Nomad's device hook hands the task
//     (TaskConfig.Devices): what the device plugins' Reserve returned for
//     the instances Nomad allocated to it; for themis GPUs the GPUs'
//     /dev/nvidia<minor>, a MIG instance's /dev/nvidia-caps files, and
//     /dev/nvidiactl, nvidia-uvm, nvidia-uvm-tools and nvidia-modeset
//     (device.Plugin.Reserve); no jobspec field reaches this list;
//   - the plugin config's allow_devices (say, /dev/infiniband for a gang's
//     RDMA): files, or directories whose device files are all allowed.
//
// Everything else is refused, every other GPU's device file included. Each
// file is read with lstat at task start: the rule holds its type and
// numbers, which is what the kernel checks, whatever path a task opens.

// taskDeviceRules is the allow list of a task given the device files its
// devices were reserved with and the operator's allow_devices.
func taskDeviceRules(reserved []*drivers.DeviceConfig, allow []string) ([]*devices.Rule, error) {
	var rules []*devices.Rule
	for _, d := range specconv.AllowedDevices {
		r := d.Rule
		rules = append(rules, &r)
	}
	for _, d := range reserved {
		if d == nil {
			continue
		}
		perms := d.Permissions
		if perms == "" {
			perms = "rw"
		}
		if strings.Trim(perms, "rwm") != "" {
			return nil, fmt.Errorf("device %s reserved for the task: cgroup permissions %q are not a subset of \"rwm\"", d.HostPath, perms)
		}
		r, err := deviceRule(d.HostPath, perms)
		if err != nil {
			return nil, fmt.Errorf("device %s reserved for the task: %w", d.HostPath, err)
		}
		rules = append(rules, r)
	}
	for _, p := range allow {
		rs, err := allowedDeviceRules(p)
		if err != nil {
			return nil, fmt.Errorf("allow_devices: %s: %w", p, err)
		}
		rules = append(rules, rs...)
	}
	return rules, nil
}

// deviceRule allows the character or block device file at path (not
// followed if a symlink) with perms.
func deviceRule(path, perms string) (*devices.Rule, error) {
	d, err := rdevices.DeviceFromPath(path, perms)
	if err != nil {
		return nil, err
	}
	if d.Type != devices.CharDevice && d.Type != devices.BlockDevice {
		return nil, fmt.Errorf("not a character or block device")
	}
	d.Allow = true
	return &d.Rule, nil
}

// allowedDeviceRules allows, read-write, the device file at path, or every
// device file under the directory at path; nothing where path does not
// exist on this node.
func allowedDeviceRules(path string) ([]*devices.Rule, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		r, err := deviceRule(path, "rw")
		if err != nil {
			return nil, err
		}
		return []*devices.Rule{r}, nil
	}
	ds, err := rdevices.GetDevices(path)
	if err != nil {
		return nil, err
	}
	var rules []*devices.Rule
	for _, d := range ds {
		r := d.Rule
		r.Permissions, r.Allow = "rw", true
		rules = append(rules, &r)
	}
	return rules, nil
}
