package device

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/themis-nomad/themis/device/topology"
)

// configSpec is the schema of the plugin's block in the Nomad agent config:
//
//	plugin "themis-device" {
//	  config {
//	    backend            = "sim"
//	    topology_file      = "/etc/themis/topology.hcl"
//	    node               = "dev-node"
//	    fingerprint_period = "10s"
//	    rack               = "rack0"  # nvml: the node's rack
//	    xid_recovery       = ""       # nvml: how long after its last critical XID a GPU is healthy again; "" never
//	    checkpoint_root    = "/var/lib/themis/checkpoints"  # the themis driver's: mounts a job's own dir into its exec and docker tasks (ckptmount.go); "" off
//	    consul_address     = "127.0.0.1:8500"  # Consul holding the GPU leases (with checkpoint_root)
//	    consul_token       = ""       # default $CONSUL_HTTP_TOKEN; read on themis/leases/
//	  }
//	}
var configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"backend": hclspec.NewDefault(
		hclspec.NewAttr("backend", "string", false),
		hclspec.NewLiteral(`"sim"`),
	),
	"topology_file": hclspec.NewDefault(
		hclspec.NewAttr("topology_file", "string", false),
		hclspec.NewLiteral(`""`),
	),
	"node": hclspec.NewDefault(
		hclspec.NewAttr("node", "string", false),
		hclspec.NewLiteral(`""`),
	),
	"fingerprint_period": hclspec.NewDefault(
		hclspec.NewAttr("fingerprint_period", "string", false),
		hclspec.NewLiteral(`"10s"`),
	),
	"rack": hclspec.NewDefault(
		hclspec.NewAttr("rack", "string", false),
		hclspec.NewLiteral(`""`),
	),
	"xid_recovery": hclspec.NewDefault(
		hclspec.NewAttr("xid_recovery", "string", false),
		hclspec.NewLiteral(`""`),
	),
	"checkpoint_root": hclspec.NewAttr("checkpoint_root", "string", false),
	"consul_address": hclspec.NewDefault(
		hclspec.NewAttr("consul_address", "string", false),
		hclspec.NewLiteral(`"127.0.0.1:8500"`),
	),
	"consul_token": hclspec.NewAttr("consul_token", "string", false),
})

// Config is the decoded plugin configuration.
type Config struct {
	// Backend selects how GPUs are discovered: "sim" or "nvml".
	Backend string `codec:"backend"`
	// TopologyFile is the topology file the sim backend reads.
	TopologyFile string `codec:"topology_file"`
	// Node names this client's node in the topology file; empty selects the
	// file's only node. The nvml backend reports it as the node's name in
	// the topology (default: the host name).
	Node string `codec:"node"`
	// Rack is the nvml backend's rack for the node (default
	// topology.DefaultRack); the sim backend takes it from the file.
	Rack string `codec:"rack"`
	// XIDRecovery is how long after its last critical XID the nvml backend
	// reports a GPU healthy again, as a Go duration; empty: never (until the
	// plugin restarts), as NVIDIA's own device plugins do.
	XIDRecovery string `codec:"xid_recovery"`
	// FingerprintPeriod is how often the backend is polled, as a Go duration.
	FingerprintPeriod string `codec:"fingerprint_period"`
	// CheckpointRoot is the themis driver's checkpoint_root: when set,
	// Reserve mounts the dir of the job a task's GPUs are leased to into
	// its exec or docker task (ckptmount.go).
	CheckpointRoot string `codec:"checkpoint_root"`
	// ConsulAddress and ConsulToken reach the GPU leases (with
	// CheckpointRoot); an empty token is $CONSUL_HTTP_TOKEN.
	ConsulAddress string `codec:"consul_address"`
	ConsulToken   string `codec:"consul_token"`
}

func defaultConfig() Config {
	return Config{Backend: BackendSim, FingerprintPeriod: "10s"}
}

// decodeConfig decodes the MessagePack configuration Nomad sends and checks
// the fields that need no backend.
func decodeConfig(data []byte) (Config, time.Duration, error) {
	cfg, period, err := decodeConfigFields(data)
	if err != nil {
		return Config{}, 0, err
	}
	if _, err := cfg.xidRecovery(); err != nil {
		return Config{}, 0, err
	}
	if cfg.CheckpointRoot != "" && !filepath.IsAbs(cfg.CheckpointRoot) {
		return Config{}, 0, fmt.Errorf("checkpoint_root: must be an absolute path, got %q", cfg.CheckpointRoot)
	}
	if cfg.Rack != "" {
		if err := topology.ValidatePath(cfg.Rack); err != nil || strings.Contains(cfg.Rack, topology.PathSeparator) {
			return Config{}, 0, fmt.Errorf("rack %q must be one cell name, without whitespace or any of ,=;:/", cfg.Rack)
		}
	}
	return cfg, period, nil
}

// xidRecovery parses XIDRecovery: 0 for never.
func (c Config) xidRecovery() (time.Duration, error) {
	if c.XIDRecovery == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(c.XIDRecovery)
	if err != nil {
		return 0, fmt.Errorf("xid_recovery %q: %w", c.XIDRecovery, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("xid_recovery %q must be positive (leave it empty for never)", c.XIDRecovery)
	}
	return d, nil
}

func decodeConfigFields(data []byte) (Config, time.Duration, error) {
	cfg := defaultConfig()
	if len(data) > 0 {
		if err := base.MsgPackDecode(data, &cfg); err != nil {
			return Config{}, 0, fmt.Errorf("decode plugin config: %w", err)
		}
	}
	if cfg.Backend == "" {
		cfg.Backend = BackendSim
	}
	period, err := time.ParseDuration(cfg.FingerprintPeriod)
	if err != nil {
		return Config{}, 0, fmt.Errorf("fingerprint_period %q: %w", cfg.FingerprintPeriod, err)
	}
	if period <= 0 {
		return Config{}, 0, fmt.Errorf("fingerprint_period %q must be positive", cfg.FingerprintPeriod)
	}
	return cfg, period, nil
}
