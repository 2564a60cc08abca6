package cluster

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Philly's node counts and assumed rack sizes (docs/simulator.md, "The
// philly presets").
const (
	Philly4GPUNodes = 100
	Philly8GPUNodes = 250
	// PhillyRackGPUs is the assumed number of GPUs in a rack.
	PhillyRackGPUs = 64
	// PhillyTraceGPUs is the size of the philly preset: the Philly node
	// mix at the scale of the published trace (philly.csv).
	PhillyTraceGPUs = 480
)

// The Themis paper's heterogeneous simulated cluster (NSDI'20, section 6.1
// and its footnote 6; see docs/simulator.md): machines of 8 GPUs (4 slots of
// 2), 4 GPUs (4 slots of 1) and 1 GPU. The footnote lists 16 + 6 + 16
// machines, 168 GPUs (ThemisFootnoteGPUs), against the text's 256; the
// themis preset keeps the footnote's machine shapes and their proportions
// at 256 GPUs (ThemisGPUs).
const (
	Themis8GPUNodes = 24
	Themis4GPUNodes = 10
	Themis1GPUNodes = 24
	// ThemisGPUs is the size of the themis preset, the paper's 256.
	ThemisGPUs = 8*Themis8GPUNodes + 4*Themis4GPUNodes + Themis1GPUNodes
	// The footnote's machine counts, literally (the themis-footnote preset).
	ThemisFootnote8GPUNodes = 16
	ThemisFootnote4GPUNodes = 6
	ThemisFootnote1GPUNodes = 16
	ThemisFootnoteGPUs      = 8*ThemisFootnote8GPUNodes + 4*ThemisFootnote4GPUNodes + ThemisFootnote1GPUNodes
	// ThemisRackGPUs is the assumed number of GPUs in a rack (the paper
	// gives none): 8 8-GPU machines, or up to 16 4-GPU or 64 1-GPU ones,
	// each machine shape in racks of its own.
	ThemisRackGPUs = 64
	// ThemisSlots is the number of slots in the footnote's 8-GPU and 4-GPU
	// machines.
	ThemisSlots = 4
)

// presets are the named clusters; each builds a fresh copy.
var presets = map[string]func() (*Cluster, error){
	// The Tiresias testbed-scale example: one switch, 2 nodes of 4 GPUs.
	"n2g4": func() (*Cluster, error) { return Uniform("n2g4", 1, 2, 4) },
	"n8g8": func() (*Cluster, error) { return Uniform("n8g8", 1, 8, 8) },
	// The Philly cluster sized to the published trace (docs/simulator.md,
	// "The philly presets").
	"philly": func() (*Cluster, error) {
		c, err := PhillyScaled(PhillyTraceGPUs)
		if c != nil {
			c.Name = "philly"
		}
		return c, err
	},
	// The whole Philly cluster as the Tiresias paper describes it.
	"philly-full": func() (*Cluster, error) {
		return Mixed("philly-full",
			NodeGroup{Count: Philly4GPUNodes, GPUsPerNode: 4, NodesPerRack: PhillyRackGPUs / 4},
			NodeGroup{Count: Philly8GPUNodes, GPUsPerNode: 8, NodesPerRack: PhillyRackGPUs / 8})
	},
	"philly-256": func() (*Cluster, error) { return PhillyScaled(256) },
	// The FitGpp paper's simulated cluster (section 3): 84 nodes of 32
	// CPUs, 256 GB and 8 GPUs. Its racks (12 nodes) are our choice; the
	// paper's jobs run on one node each.
	"fitgpp84": func() (*Cluster, error) {
		c, err := Uniform("fitgpp84", 7, 12, 8)
		if err != nil {
			return nil, err
		}
		for i := range c.Nodes {
			c.Nodes[i].CPU, c.Nodes[i].Memory = 32, 256
		}
		return c, nil
	},
	// The Themis paper's simulated cluster at its stated 256 GPUs, and the
	// footnote's literal machine list (168 GPUs); see docs/simulator.md.
	"themis": func() (*Cluster, error) {
		return Themis("themis", Themis8GPUNodes, Themis4GPUNodes, Themis1GPUNodes)
	},
	// The Themis paper's strategic-lying cluster (section 6.3, Figure 18):
	// 64 GPUs, one 8-GPU machine and 28 2-GPU machines (each shape in a rack
	// of its own, so a gang on 2-GPU machines spans machines of one rack).
	"themis-fig18": func() (*Cluster, error) {
		c, err := Mixed("themis-fig18",
			NodeGroup{Count: 1, GPUsPerNode: 8, NodesPerRack: 1},
			NodeGroup{Count: 28, GPUsPerNode: 2, NodesPerRack: 28})
		if err != nil {
			return nil, err
		}
		setSlotPaths(c)
		return c, nil
	},
	"themis-footnote": func() (*Cluster, error) {
		return Themis("themis-footnote", ThemisFootnote8GPUNodes, ThemisFootnote4GPUNodes, ThemisFootnote1GPUNodes)
	},
}

// setSlotPaths gives every GPU its slot as its path (ThemisSlotPath).
func setSlotPaths(c *Cluster) {
	for i := range c.Nodes {
		gpus := c.Nodes[i].GPUs
		for j := range gpus {
			gpus[j].Path = ThemisSlotPath(len(gpus), j)
		}
	}
}

// Themis builds a cluster in the Themis paper's shape (section 6.1): n8
// 8-GPU, n4 4-GPU and n1 1-GPU machines, in that order, each shape in racks
// of its own of ThemisRackGPUs GPUs, and each GPU's path its slot
// (ThemisSlotPath), so that placement has the paper's four levels: GPU,
// slot, machine, rack. A count of 0 leaves that shape out.
func Themis(name string, n8, n4, n1 int) (*Cluster, error) {
	var groups []NodeGroup
	for _, g := range []NodeGroup{
		{Count: n8, GPUsPerNode: 8, NodesPerRack: ThemisRackGPUs / 8},
		{Count: n4, GPUsPerNode: 4, NodesPerRack: ThemisRackGPUs / 4},
		{Count: n1, GPUsPerNode: 1, NodesPerRack: ThemisRackGPUs},
	} {
		if g.Count < 0 {
			return nil, fmt.Errorf("themis cluster %q: %d %d-GPU machines: want a count >= 0", name, g.Count, g.GPUsPerNode)
		}
		if g.Count > 0 {
			groups = append(groups, g)
		}
	}
	c, err := Mixed(name, groups...)
	if err != nil {
		return nil, err
	}
	setSlotPaths(c)
	return c, nil
}

// ThemisSlotPath is the cell path of GPU index in a machine of gpusPerNode
// GPUs of the Themis cluster: one level, the slot, "slot<k>", of
// max(1, gpusPerNode/ThemisSlots) consecutive GPUs. The footnote's 8-GPU
// machines have 4 slots of 2 GPUs, its 4-GPU machines 4 slots of 1 and its
// 1-GPU machines one slot. Nil for an index out of range.
func ThemisSlotPath(gpusPerNode, index int) []string {
	if index < 0 || index >= gpusPerNode {
		return nil
	}
	perSlot := max(1, gpusPerNode/ThemisSlots)
	return []string{"slot" + strconv.Itoa(index/perSlot)}
}

// Presets lists the preset names, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for name := range presets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Preset builds the named preset cluster.
func Preset(name string) (*Cluster, error) {
	build, ok := presets[name]
	if n, isScaled := strings.CutPrefix(name, "philly-"); !ok && isScaled {
		gpus, err := strconv.Atoi(n)
		if err != nil {
			return nil, fmt.Errorf("cluster preset %q: philly-<GPUs> wants a whole number of GPUs", name)
		}
		c, err := PhillyScaled(gpus)
		if err != nil {
			return nil, fmt.Errorf("cluster preset %q: %w", name, err)
		}
		return c, nil
	}
	if !ok {
		return nil, fmt.Errorf("unknown cluster preset %q; presets: %s", name, strings.Join(Presets(), ", "))
	}
	return build()
}

// PhillyScaled is a Philly-like cluster of gpus GPUs (a positive multiple of
// 4): 4-GPU and 8-GPU nodes in Philly's ratio, about one GPU in six on 4-GPU
// nodes, racks of PhillyRackGPUs GPUs. It is named "philly-<gpus>".
func PhillyScaled(gpus int) (*Cluster, error) {
	if gpus <= 0 || gpus%4 != 0 || gpus > MaxGPUs {
		return nil, fmt.Errorf("philly-scaled cluster: %d GPUs: want a positive multiple of 4, at most %d", gpus, MaxGPUs)
	}
	all4 := Philly4GPUNodes * 4
	all := all4 + Philly8GPUNodes*8
	// Round the 4-GPU nodes to Philly's share, then fill with 8-GPU nodes;
	// 4 GPUs left over make one more 4-GPU node.
	n4 := (gpus*all4/4 + all/2) / all
	n8 := (gpus - 4*n4) / 8
	if gpus-4*n4-8*n8 == 4 {
		n4++
	}
	var groups []NodeGroup
	if n4 > 0 {
		groups = append(groups, NodeGroup{Count: n4, GPUsPerNode: 4, NodesPerRack: PhillyRackGPUs / 4})
	}
	if n8 > 0 {
		groups = append(groups, NodeGroup{Count: n8, GPUsPerNode: 8, NodesPerRack: PhillyRackGPUs / 8})
	}
	return Mixed("philly-"+strconv.Itoa(gpus), groups...)
}

// specRE matches compact specs: "[r<racks>]n<nodes per rack>g<GPUs per node>".
var specRE = regexp.MustCompile(`^(?:r([0-9]+))?n([0-9]+)g([0-9]+)$`)

// ErrNotSpec is returned by ParseSpec for text that is not a compact spec.
var ErrNotSpec = errors.New("not a cluster spec")

// ParseSpec builds a uniform cluster from a compact spec
// "[r<racks>]n<nodes per rack>g<GPUs per node>" (racks default to 1), e.g.
// "n8g8" or "r4n16g8"; the cluster is named after the spec.
func ParseSpec(spec string) (*Cluster, error) {
	m := specRE.FindStringSubmatch(spec)
	if m == nil {
		return nil, fmt.Errorf("%q: %w, want [r<racks>]n<nodes per rack>g<GPUs per node>, e.g. r4n16g8", spec, ErrNotSpec)
	}
	racks := 1
	var err error
	num := func(s string) int {
		n, e := strconv.Atoi(s)
		if e != nil && err == nil {
			err = fmt.Errorf("cluster spec %q: %q is too large", spec, s)
		}
		return n
	}
	if m[1] != "" {
		racks = num(m[1])
	}
	nodes, gpus := num(m[2]), num(m[3])
	if err != nil {
		return nil, err
	}
	return Uniform(spec, racks, nodes, gpus)
}
