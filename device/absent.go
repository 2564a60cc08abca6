package device

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/device/topology"
)

// absentBackend is the nvml backend where NVML cannot be had (a binary
// built without cgo): it reports the node with no GPUs, so the client runs
// on with no themis GPUs rather than failing.
type absentBackend struct {
	node, rack string
}

func newAbsentBackend(cfg Config, logger hclog.Logger, why string) *absentBackend {
	node, rack := nvmlNodeName(cfg)
	logger.Warn("NVML is not available: reporting no GPUs", "reason", why)
	return &absentBackend{node: node, rack: rack}
}

func (a *absentBackend) Name() string { return BackendNVML }

func (a *absentBackend) Fingerprint(ctx context.Context) (*Inventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &Inventory{Node: a.node, Rack: a.rack}, nil
}

func (a *absentBackend) Stats(ctx context.Context) ([]GPUStats, error) {
	return nil, ctx.Err()
}

// nvmlNodeName is the node's name and rack as the nvml backend reports
// them: the configured node (default: the host name, or "localhost") and
// rack (default topology.DefaultRack).
func nvmlNodeName(cfg Config) (node, rack string) {
	node, rack = cfg.Node, cfg.Rack
	if node == "" {
		node = hostname()
	}
	if rack == "" {
		rack = topology.DefaultRack
	}
	return node, rack
}

// hostname is the host's name, or "localhost" when it has none.
func hostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}
