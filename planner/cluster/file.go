package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/planner/core"
)

// Load reads a topology file in the device plugin's format (see
// topology.Load) as a cluster named after the file.
func Load(path string) (*Cluster, error) {
	t, err := topology.Load(path)
	if err != nil {
		return nil, fmt.Errorf("load cluster: %w", err)
	}
	return FromTopology(filepath.Base(path), t), nil
}

// FromTopology converts a parsed topology file: a node's ID is its name; GPUs
// keep the file's IDs, indices, paths and health (a file may mark GPUs
// unhealthy); every node is schedulable.
func FromTopology(name string, t *topology.Topology) *Cluster {
	c := &Cluster{Name: name, Nodes: make([]core.Node, 0, len(t.Nodes))}
	for _, tn := range t.Nodes {
		n := core.Node{ID: tn.Name, Name: tn.Name, Rack: tn.Rack, Schedulable: true, GPUs: make([]core.GPU, len(tn.GPUs))}
		for i, g := range tn.GPUs {
			n.GPUs[i] = core.GPU{ID: g.ID, Index: g.Index, Path: g.Cells(), Healthy: g.Healthy}
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c
}

// FromPresetOrFile builds the cluster arg names: a preset, else a compact
// spec, else an existing topology file.
func FromPresetOrFile(arg string) (*Cluster, error) {
	if _, ok := presets[arg]; ok || strings.HasPrefix(arg, "philly-") {
		return Preset(arg)
	}
	c, err := ParseSpec(arg)
	if !errors.Is(err, ErrNotSpec) {
		return c, err
	}
	if fi, statErr := os.Stat(arg); statErr == nil && !fi.IsDir() {
		return Load(arg)
	}
	return nil, fmt.Errorf("cluster %q is not a preset (%s, philly-<GPUs>), a spec ([r<racks>]n<nodes per rack>g<GPUs per node>, e.g. r4n16g8) or an existing topology file",
		arg, strings.Join(Presets(), ", "))
}
