package topology

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// DefaultRack is the rack of a node block that names none.
const DefaultRack = "rack0"

// Topology is a parsed topology file: the nodes it describes, in file order.
type Topology struct {
	// File is the file name the topology was parsed from.
	File string
	// Nodes are the node blocks, in file order.
	Nodes []Node
}

// Node is one node block: a Nomad client and its GPUs.
type Node struct {
	// Name is the node block's label.
	Name string
	// Rack is the rack the node sits in (DefaultRack when not given).
	Rack string
	// GPUs are the node's GPUs, sorted by index.
	GPUs []GPU
}

// Node returns the node named name.
func (t *Topology) Node(name string) (Node, bool) {
	for _, n := range t.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// NodeNames returns the node names in file order.
func (t *Topology) NodeNames() []string {
	names := make([]string, len(t.Nodes))
	for i, n := range t.Nodes {
		names[i] = n.Name
	}
	return names
}

// Load reads and parses the topology file at path.
func Load(path string) (*Topology, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load topology %q: %w", path, err)
	}
	return Parse(src, path)
}

var (
	fileSchema = &hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "node", LabelNames: []string{"name"}}},
	}
	nodeSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "rack"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "gpu"}},
	}
	gpuSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "index", Required: true},
			{Name: "model", Required: true},
			{Name: "memory_mib", Required: true},
			{Name: "path", Required: true},
			{Name: "id"},
			{Name: "healthy"},
			{Name: "health_description"},
			{Name: "pci_bus_id"},
		},
	}
)

// Parse parses a topology file's contents; filename is used in error
// messages. All problems found are returned together as hcl.Diagnostics, each
// naming the field, the value and the file:line it sits at.
func Parse(src []byte, filename string) (*Topology, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, DiagError("topology", diags)
	}
	content, diags := file.Body.Content(fileSchema)
	p := parser{Diags{List: diags}}
	topo := &Topology{File: filename}
	nodeAt := map[string]hcl.Range{}
	idAt := map[string]hcl.Range{}
	for _, block := range content.Blocks {
		name := block.Labels[0]
		if prev, dup := nodeAt[name]; dup {
			p.Errorf(block.LabelRanges[0], "Duplicate node", "node %q is already defined at %s", name, prev)
			continue
		}
		nodeAt[name] = block.DefRange
		if node, ok := p.node(block, idAt); ok {
			topo.Nodes = append(topo.Nodes, node)
		}
	}
	if len(content.Blocks) == 0 && !p.List.HasErrors() {
		p.Errorf(file.Body.MissingItemRange(), "No nodes", "topology file %s has no node blocks", filename)
	}
	if p.List.HasErrors() {
		return nil, DiagError("topology", p.List)
	}
	return topo, nil
}

// parser collects diagnostics while decoding blocks.
type parser struct{ Diags }

// Diags collects the diagnostics of an HCL file while its blocks are
// decoded, so that one parse reports every problem with its position. The
// VC config parser (package hived) uses it too.
type Diags struct{ List hcl.Diagnostics }

// Errorf records an error at rng.
func (d *Diags) Errorf(rng hcl.Range, summary, format string, args ...any) {
	r := rng
	d.List = append(d.List, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  &r,
	})
}

// Decode decodes an attribute's expression into target, recording problems.
func (d *Diags) Decode(attr *hcl.Attribute, target any) bool {
	diags := gohcl.DecodeExpression(attr.Expr, nil, target)
	d.List = append(d.List, diags...)
	return !diags.HasErrors()
}

func (p *parser) node(block *hcl.Block, idAt map[string]hcl.Range) (Node, bool) {
	name := block.Labels[0]
	ok := true
	if _, bad := badRune(name, ",;:/="); bad || name == "" {
		p.Errorf(block.LabelRanges[0], "Invalid node name", "node name %q must be non-empty, without whitespace or any of ,;:/=", name)
		ok = false
	}
	content, diags := block.Body.Content(nodeSchema)
	p.List = append(p.List, diags...)
	node := Node{Name: name, Rack: DefaultRack}
	if attr, set := content.Attributes["rack"]; set {
		if p.Decode(attr, &node.Rack) {
			if node.Rack == "" || strings.Contains(node.Rack, PathSeparator) || ValidatePath(node.Rack) != nil {
				p.Errorf(attr.Expr.Range(), "Invalid rack", "node %q: rack %q must be one non-empty cell name, without whitespace or any of ,=;:/", name, node.Rack)
				ok = false
			}
		} else {
			ok = false
		}
	}
	if len(content.Blocks) == 0 {
		p.Errorf(block.DefRange, "No GPUs", "node %q has no gpu blocks", name)
		ok = false
	}
	indexAt := map[int]hcl.Range{}
	for _, gb := range content.Blocks {
		gpu, gpuOK := p.gpu(name, gb)
		if !gpuOK {
			ok = false
			continue
		}
		if prev, dup := indexAt[gpu.Index]; dup {
			p.Errorf(gb.DefRange, "Duplicate GPU index", "node %q: gpu index %d is already used at %s", name, gpu.Index, prev)
			ok = false
			continue
		}
		indexAt[gpu.Index] = gb.DefRange
		if prev, dup := idAt[gpu.ID]; dup {
			p.Errorf(gb.DefRange, "Duplicate GPU id", "node %q: gpu id %q is already used at %s", name, gpu.ID, prev)
			ok = false
			continue
		}
		idAt[gpu.ID] = gb.DefRange
		node.GPUs = append(node.GPUs, gpu)
	}
	sort.Slice(node.GPUs, func(i, j int) bool { return node.GPUs[i].Index < node.GPUs[j].Index })
	return node, ok
}

func (p *parser) gpu(node string, block *hcl.Block) (GPU, bool) {
	content, diags := block.Body.Content(gpuSchema)
	p.List = append(p.List, diags...)
	if diags.HasErrors() {
		return GPU{}, false
	}
	gpu := GPU{Healthy: true}
	attrs := content.Attributes
	ok := p.Decode(attrs["index"], &gpu.Index)
	ok = p.Decode(attrs["model"], &gpu.Model) && ok
	ok = p.Decode(attrs["memory_mib"], &gpu.MemoryMiB) && ok
	ok = p.Decode(attrs["path"], &gpu.Path) && ok
	for _, opt := range []struct {
		name   string
		target any
	}{
		{"id", &gpu.ID},
		{"healthy", &gpu.Healthy},
		{"health_description", &gpu.HealthDescription},
		{"pci_bus_id", &gpu.PCIBusID},
	} {
		if attr, set := attrs[opt.name]; set {
			ok = p.Decode(attr, opt.target) && ok
		}
	}
	if !ok {
		return GPU{}, false
	}
	at := func(name string) hcl.Range {
		if attr, set := attrs[name]; set {
			return attr.Expr.Range()
		}
		return block.DefRange
	}
	if gpu.Index < 0 {
		p.Errorf(at("index"), "Invalid GPU index", "node %q: gpu index %d must not be negative", node, gpu.Index)
		ok = false
	}
	if gpu.MemoryMiB <= 0 {
		p.Errorf(at("memory_mib"), "Invalid GPU memory", "node %q gpu %d: memory_mib %d must be positive", node, gpu.Index, gpu.MemoryMiB)
		ok = false
	}
	if strings.TrimSpace(gpu.Model) == "" || strings.Contains(gpu.Model, "/") || strings.IndexFunc(gpu.Model, isControl) >= 0 {
		p.Errorf(at("model"), "Invalid GPU model", "node %q gpu %d: model %q must be non-empty, without '/' or control characters", node, gpu.Index, gpu.Model)
		ok = false
	}
	if err := ValidatePath(gpu.Path); err != nil {
		p.Errorf(at("path"), "Invalid GPU path", "node %q gpu %d: %v", node, gpu.Index, err)
		ok = false
	}
	if _, set := attrs["id"]; !set {
		gpu.ID = fmt.Sprintf("SIM-%s-%d", node, gpu.Index)
	}
	if err := ValidateID(gpu.ID); err != nil {
		p.Errorf(at("id"), "Invalid GPU id", "node %q gpu %d: %v", node, gpu.Index, err)
		ok = false
	}
	if r, bad := badRune(gpu.PCIBusID, ",;"); bad {
		p.Errorf(at("pci_bus_id"), "Invalid PCI bus id", "node %q gpu %d: pci_bus_id %q contains %q", node, gpu.Index, gpu.PCIBusID, r)
		ok = false
	}
	if gpu.Healthy {
		gpu.HealthDescription = ""
	} else if gpu.HealthDescription == "" {
		gpu.HealthDescription = "marked healthy = false in the topology file"
	}
	return gpu, ok
}

func isControl(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }

// DiagError turns diagnostics into one error, "invalid <what>: ", that
// lists every problem, one a line, each as "file:line,col-col: summary;
// detail".
func DiagError(what string, diags hcl.Diagnostics) error {
	errs := make([]error, 0, len(diags))
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			errs = append(errs, d)
		}
	}
	return fmt.Errorf("invalid %s: %w", what, errors.Join(errs...))
}
