package device

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/device/topology"
)

// Backend names accepted by the plugin's "backend" option.
const (
	BackendSim  = "sim"
	BackendNVML = "nvml"
)

// Inventory is what a backend sees on its node: the node's name and rack in
// the cluster topology, and its GPUs sorted by index.
type Inventory struct {
	Node string
	Rack string
	GPUs []topology.GPU
	// Access says, by GPU ID, how a task reaches a GPU beyond its ID; a GPU
	// without an entry (every simulated GPU) is named by its index and has
	// no device files.
	Access map[string]Access
	// SharedDeviceNodes are the device files every task given a GPU needs
	// besides the GPUs' own (/dev/nvidiactl, /dev/nvidia-uvm, ...).
	SharedDeviceNodes []string
}

// Access is how a task reaches one GPU.
type Access struct {
	// CUDAName names the GPU in CUDA_VISIBLE_DEVICES: empty for its index,
	// the MIG device's UUID for a MIG instance (CUDA knows no index for it).
	CUDAName string
	// DeviceNodes are the GPU's own device files on the host
	// (/dev/nvidia3; a MIG instance adds its /dev/nvidia-caps files).
	DeviceNodes []string
}

// GPUStats is one sample of one GPU's statistics.
type GPUStats struct {
	ID             string
	Model          string
	MemoryTotalMiB int64
	MemoryUsedMiB  int64
	// The measurements below are nil where the backend cannot take them (a
	// simulated GPU, a MIG instance, a call NVML does not support).
	//
	// UtilizationPct is the percent of time a kernel ran over the last
	// sample period; MemoryUtilPct the percent of time memory was read or
	// written.
	UtilizationPct *int64
	MemoryUtilPct  *int64
	// TemperatureC is the GPU die temperature in degrees Celsius.
	TemperatureC *int64
	// PowerW is the board's power draw in watts.
	PowerW *float64
	// Simulated is true when the numbers are not measured on hardware.
	Simulated bool
	Timestamp time.Time
}

// Backend discovers the GPUs of one node. The plugin calls Fingerprint every
// fingerprint period and Stats every stats interval; both may be called
// concurrently.
//
// The backends, as go-nvml pairs its library Interface with simulated
// servers:
//
//   - "sim" (simBackend): reads a topology file, re-read on every call so an
//     operator can flip a GPU's health by editing it.
//   - "nvml" (nvmlBackend, nvml*.go, built with cgo on Linux): real GPUs
//     through github.com/NVIDIA/go-nvml's nvml.Interface, injected so its
//     tests run against fakes built on go-nvml's mock servers. Without cgo,
//     or where libnvidia-ml cannot be loaded, it reports no GPUs.
type Backend interface {
	// Name is the backend's name, fingerprinted as the "backend" attribute.
	Name() string
	// Fingerprint returns the node's current inventory.
	Fingerprint(ctx context.Context) (*Inventory, error)
	// Stats samples every GPU of the node.
	Stats(ctx context.Context) ([]GPUStats, error)
}

// Closer is implemented by backends that hold resources (NVML, its event
// watcher); the plugin closes a backend it replaces.
type Closer interface {
	Close()
}

// Notifier is implemented by backends that learn of changes between
// fingerprints (NVML health events): a value on Changed has the plugin
// fingerprint at once rather than at the next period.
type Notifier interface {
	Changed() <-chan struct{}
}

// newBackend builds the backend the configuration selects; openNVML builds
// the nvml one (the plugin's openNVML field, so tests inject a fake NVML).
func newBackend(cfg Config, logger hclog.Logger, openNVML func(Config, hclog.Logger) (Backend, error)) (Backend, error) {
	switch cfg.Backend {
	case BackendSim:
		return newSimBackend(cfg.TopologyFile, cfg.Node, time.Now)
	case BackendNVML:
		return openNVML(cfg, logger)
	default:
		return nil, fmt.Errorf("backend %q is unknown: want %q or %q", cfg.Backend, BackendSim, BackendNVML)
	}
}
