package device

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	nomaddevice "github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/themis-nomad/themis/device/topology"
)

const (
	// PluginName is the plugin's name; it equals the binary's file name, as
	// Nomad's `plugin "themis-device" {}` agent block requires.
	PluginName = "themis-device"
	// PluginVersion is the plugin's version.
	PluginVersion = "0.1.0"
)

// Environment variables Reserve sets for a task.
const (
	EnvNvidiaVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	EnvCudaVisibleDevices   = "CUDA_VISIBLE_DEVICES"
	EnvThemisGPUIDs         = "THEMIS_GPU_IDS"
)

var pluginInfo = &base.PluginInfoResponse{
	Type:              base.PluginTypeDevice,
	PluginApiVersions: []string{nomaddevice.ApiVersion010},
	PluginVersion:     PluginVersion,
	Name:              PluginName,
}

// Plugin is the themis device plugin: it fingerprints a node's GPUs through a
// Backend as Nomad device groups, one per GPU model, and reserves them for
// tasks.
type Plugin struct {
	logger hclog.Logger

	mu      sync.Mutex
	backend Backend
	period  time.Duration
	// latest is the last inventory fingerprinted, used by Reserve.
	latest *Inventory

	// openNVML builds the nvml backend: openNVMLBackend, which loads
	// libnvidia-ml, or a fake NVML in tests.
	openNVML func(Config, hclog.Logger) (Backend, error)

	// checkpointRoot and leases make the checkpoint mounts of exec and
	// docker tasks (ckptmount.go); leaseOverride replaces Consul in tests.
	checkpointRoot string
	leases         GPULeaseReader
	leaseOverride  GPULeaseReader
}

var _ nomaddevice.DevicePlugin = (*Plugin)(nil)

// NewPlugin returns an unconfigured plugin; Nomad calls SetConfig next.
func NewPlugin(logger hclog.Logger) *Plugin {
	return &Plugin{logger: logger.Named(PluginName), openNVML: openNVMLBackend}
}

// PluginInfo describes the plugin to Nomad.
func (p *Plugin) PluginInfo() (*base.PluginInfoResponse, error) {
	return pluginInfo, nil
}

// ConfigSchema returns the schema of the plugin's configuration.
func (p *Plugin) ConfigSchema() (*hclspec.Spec, error) {
	return configSpec, nil
}

// SetConfig decodes the configuration and builds the backend it selects; a
// missing topology file or an unknown node is an error here, at agent start.
func (p *Plugin) SetConfig(c *base.Config) error {
	var data []byte
	if c != nil {
		data = c.PluginConfig
	}
	cfg, period, err := decodeConfig(data)
	if err != nil {
		return err
	}
	backend, err := newBackend(cfg, p.logger, p.openNVML)
	if err != nil {
		return err
	}
	var leases GPULeaseReader
	if cfg.CheckpointRoot != "" {
		leases = p.leaseOverride
		if leases == nil {
			if leases, err = newConsulLeases(cfg.ConsulAddress, cfg.ConsulToken); err != nil {
				return fmt.Errorf("consul_address: %w", err)
			}
		}
	}
	p.mu.Lock()
	old := p.backend
	p.backend, p.period, p.latest = backend, period, nil
	p.checkpointRoot, p.leases = cfg.CheckpointRoot, leases
	p.mu.Unlock()
	if c, ok := old.(Closer); ok {
		c.Close()
	}
	if cfg.Backend == BackendSim {
		p.logger.Info("configured", "backend", backend.Name(), "topology_file", cfg.TopologyFile,
			"node", cfg.Node, "fingerprint_period", period)
	} else {
		p.logger.Info("configured", "backend", backend.Name(), "node", cfg.Node, "rack", cfg.Rack,
			"xid_recovery", cfg.XIDRecovery, "fingerprint_period", period)
	}
	return nil
}

// configured returns the backend and fingerprint period, or an error when
// SetConfig has not succeeded yet.
func (p *Plugin) configured() (Backend, time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.backend == nil {
		return nil, 0, status.Error(codes.FailedPrecondition, "plugin is not configured: SetConfig has not succeeded")
	}
	return p.backend, p.period, nil
}

// inventory returns the latest fingerprinted inventory, fingerprinting now
// when there is none yet.
func (p *Plugin) inventory(ctx context.Context) (*Inventory, error) {
	backend, _, err := p.configured()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	inv := p.latest
	p.mu.Unlock()
	if inv != nil {
		return inv, nil
	}
	inv, err = backend.Fingerprint(ctx)
	if err != nil {
		return nil, err
	}
	p.setLatest(inv)
	return inv, nil
}

func (p *Plugin) setLatest(inv *Inventory) {
	p.mu.Lock()
	p.latest = inv
	p.mu.Unlock()
}

// Reserve tells Nomad how to expose the given GPUs to a task: environment
// variables naming them in the order given (NVIDIA_VISIBLE_DEVICES and
// THEMIS_GPU_IDS by ID, CUDA_VISIBLE_DEVICES by node-local index, or by
// UUID for a MIG instance), and, for real GPUs, their device files and the
// shared NVIDIA ones, which container drivers mount (a simulated GPU has
// none); with checkpoint_root set, the dir of the job the GPUs are leased
// to, at /themis-checkpoints (ckptmount.go).
func (p *Plugin) Reserve(deviceIDs []string) (*nomaddevice.ContainerReservation, error) {
	if len(deviceIDs) == 0 {
		return &nomaddevice.ContainerReservation{}, nil
	}
	inv, err := p.inventory(context.Background())
	if err != nil {
		return nil, err
	}
	byID := make(map[string]topology.GPU, len(inv.GPUs))
	for _, g := range inv.GPUs {
		byID[g.ID] = g
	}
	seen := make(map[string]bool, len(deviceIDs))
	cudaNames := make([]string, len(deviceIDs))
	var devices []*nomaddevice.DeviceSpec
	for i, id := range deviceIDs {
		g, ok := byID[id]
		if !ok {
			known := make([]string, 0, len(byID))
			for k := range byID {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, status.Errorf(codes.InvalidArgument, "unknown device %q on node %q (known: %s)",
				id, inv.Node, strings.Join(known, ", "))
		}
		if seen[id] {
			return nil, status.Errorf(codes.InvalidArgument, "device %q given twice", id)
		}
		seen[id] = true
		access := inv.Access[id]
		cudaNames[i] = access.CUDAName
		if cudaNames[i] == "" {
			cudaNames[i] = strconv.Itoa(g.Index)
		}
		devices = appendDeviceNodes(devices, access.DeviceNodes)
	}
	if len(devices) > 0 {
		devices = appendDeviceNodes(devices, inv.SharedDeviceNodes)
	}
	ids := strings.Join(deviceIDs, ",")
	res := &nomaddevice.ContainerReservation{
		Envs: map[string]string{
			EnvNvidiaVisibleDevices: ids,
			EnvCudaVisibleDevices:   strings.Join(cudaNames, ","),
			EnvThemisGPUIDs:         ids,
		},
		Devices: devices,
	}
	m, err := p.checkpointMount(deviceIDs)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if m != nil {
		res.Mounts = append(res.Mounts, m)
	}
	p.logger.Debug("reserved", "ids", ids, "device_files", len(devices), "checkpoint_mount", m != nil)
	return res, nil
}

// appendDeviceNodes adds each host device file not yet in specs, mounted at
// the same path in the task, read-write.
func appendDeviceNodes(specs []*nomaddevice.DeviceSpec, paths []string) []*nomaddevice.DeviceSpec {
next:
	for _, path := range paths {
		for _, s := range specs {
			if s.HostPath == path {
				continue next
			}
		}
		specs = append(specs, &nomaddevice.DeviceSpec{TaskPath: path, HostPath: path, CgroupPerms: "rw"})
	}
	return specs
}

// streamErr names the stream an error ended.
func streamErr(what string, err error) error {
	return fmt.Errorf("%s: %w", what, err)
}
