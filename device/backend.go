package device

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/themis-nomad/themis/device/topology"
)

// Backend names accepted by the plugin's "backend" option.
const (
	BackendSim  = "sim"
	BackendNVML = "nvml"
)

// ErrNVMLNotBuilt is returned when the "nvml" backend is selected: the seam is
// here, the implementation is not yet.
var ErrNVMLNotBuilt = errors.New(`backend "nvml": the nvml backend is not built yet; use backend = "sim"`)

// Inventory is what a backend sees on its node: the node's name and rack in
// the cluster topology, and its GPUs sorted by index.
type Inventory struct {
	Node string
	Rack string
	GPUs []topology.GPU
}

// GPUStats is one sample of one GPU's statistics.
type GPUStats struct {
	ID             string
	Model          string
	MemoryTotalMiB int64
	MemoryUsedMiB  int64
	// Simulated is true when the numbers are not measured on hardware.
	Simulated bool
	Timestamp time.Time
}

// Backend discovers the GPUs of one node. The plugin calls Fingerprint every
// fingerprint period and Stats every stats interval; both may be called
// concurrently.
//
// Two backends are planned, as go-nvml pairs its library Interface with
// simulated servers:
//
//   - "sim" (simBackend): reads a topology file, re-read on every call so an
//     operator can flip a GPU's health by editing it.
//   - "nvml": not built yet (ErrNVMLNotBuilt). It will live in nvml.go behind
//     a build tag, wrap github.com/NVIDIA/go-nvml's nvml.Interface (so its
//     tests run against go-nvml's mock servers), and derive GPU.Path from the
//     NVML topology (nvml.DeviceGetTopologyCommonAncestor: socket, PCIe
//     switch, NVLink pair), GPU.ID from the UUID, GPU.PCIBusID from the PCI
//     info and health from XID events. Only newBackend needs to learn its
//     name.
type Backend interface {
	// Name is the backend's name, fingerprinted as the "backend" attribute.
	Name() string
	// Fingerprint returns the node's current inventory.
	Fingerprint(ctx context.Context) (*Inventory, error)
	// Stats samples every GPU of the node.
	Stats(ctx context.Context) ([]GPUStats, error)
}

// newBackend builds the backend the configuration selects.
func newBackend(cfg Config) (Backend, error) {
	switch cfg.Backend {
	case BackendSim:
		return newSimBackend(cfg.TopologyFile, cfg.Node, time.Now)
	case BackendNVML:
		return nil, ErrNVMLNotBuilt
	default:
		return nil, fmt.Errorf("backend %q is unknown: want %q or %q", cfg.Backend, BackendSim, BackendNVML)
	}
}
