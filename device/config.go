package device

import (
	"fmt"
	"time"

	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
)

// configSpec is the schema of the plugin's block in the Nomad agent config:
//
//	plugin "themis-device" {
//	  config {
//	    backend            = "sim"
//	    topology_file      = "/etc/themis/topology.hcl"
//	    node               = "dev-node"
//	    fingerprint_period = "10s"
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
})

// Config is the decoded plugin configuration.
type Config struct {
	// Backend selects how GPUs are discovered: "sim" or "nvml".
	Backend string `codec:"backend"`
	// TopologyFile is the topology file the sim backend reads.
	TopologyFile string `codec:"topology_file"`
	// Node names this client's node in the topology file; empty selects the
	// file's only node.
	Node string `codec:"node"`
	// FingerprintPeriod is how often the backend is polled, as a Go duration.
	FingerprintPeriod string `codec:"fingerprint_period"`
}

func defaultConfig() Config {
	return Config{Backend: BackendSim, FingerprintPeriod: "10s"}
}

// decodeConfig decodes the MessagePack configuration Nomad sends and checks
// the fields that need no backend.
func decodeConfig(data []byte) (Config, time.Duration, error) {
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
