package device

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sharedDeviceFiles are the NVIDIA device files a task needs besides its
// GPUs' own; the ones present on the host are reserved.
var sharedDeviceFiles = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}

// deviceFiles finds a node's NVIDIA device files, for container drivers: a
// GPU is /dev/nvidia<minor>; a MIG instance adds the capability files its
// GPU instance and compute instance grant access through
// (/dev/nvidia-caps/nvidia-cap<N>, N read from the driver's
// /proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>[/ci<C>]/access).
// Only files present on the host are returned, so a driver never mounts a
// missing one.
type deviceFiles struct {
	// root is prefixed to every path looked at ("" on a node; a temporary
	// directory in tests). Returned paths are the host's, without it.
	root string
}

func (f deviceFiles) present(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(f.root, p)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// shared returns the shared device files present.
func (f deviceFiles) shared() []string { return f.present(sharedDeviceFiles...) }

// gpu returns the device file of the GPU with the given minor number.
func (f deviceFiles) gpu(minor int) []string {
	return f.present("/dev/nvidia" + strconv.Itoa(minor))
}

// mig returns the device files of a MIG instance: its GPU's and the
// capability files of its GPU instance gi and compute instance ci.
func (f deviceFiles) mig(minor, gi, ci int) []string {
	files := f.gpu(minor)
	dir := fmt.Sprintf("/proc/driver/nvidia/capabilities/gpu%d/mig/gi%d", minor, gi)
	for _, access := range []string{dir + "/access", fmt.Sprintf("%s/ci%d/access", dir, ci)} {
		src, err := os.ReadFile(filepath.Join(f.root, access))
		if err != nil {
			continue
		}
		if n, err := parseCapMinor(string(src)); err == nil {
			files = append(files, f.present("/dev/nvidia-caps/nvidia-cap"+strconv.Itoa(n))...)
		}
	}
	return files
}

// parseCapMinor reads the device minor from a driver capability access file:
//
//	DeviceFileMinor: 12
//	DeviceFileMode: 292
//	DeviceFileModify: 1
func parseCapMinor(src string) (int, error) {
	for line := range strings.SplitSeq(src, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "DeviceFileMinor" {
			continue
		}
		value = strings.TrimSpace(value)
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 || strings.HasPrefix(value, "+") {
			return 0, fmt.Errorf("DeviceFileMinor %q is not a non-negative integer", value)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no DeviceFileMinor line")
}
