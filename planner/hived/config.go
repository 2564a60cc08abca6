package hived

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/themis-nomad/themis/device/topology"
)

// MaxCount bounds one cells block's count.
const MaxCount = 1 << 20

// Config is the virtual clusters' configuration.
type Config struct {
	// GPUType names the leaf cell type (the GPU model); empty means
	// DefaultGPUType.
	GPUType string
	// VCs are the virtual clusters, in order.
	VCs []VCConfig
	// Namespaces bind Nomad namespaces to the one default virtual cluster
	// of a config without VCs (top-level namespace blocks; binding.go).
	Namespaces []Binding
}

// VCConfig is one virtual cluster: the cells it owns.
type VCConfig struct {
	Name string
	// Cells are bound lazily to physical cells of their type.
	Cells []CellCount
	// Pin names physical cells (racks, nodes, "<node>/<path>" cells, GPU
	// IDs, or their aliases) the VC owns for good; each counts as one more
	// cell of the pinned cell's type.
	Pin []string
	// Policy is the queue policy that ranks and preempts among the VC's
	// jobs ("" = the stack's top-level policy), and Knobs its settings
	// over the stack's ("tiresias.queues" = "1h"). Package hived only
	// carries them; the decision stack (planner/stack) builds and checks
	// them, naming PolicyPos or KnobsPos.
	Policy string
	Knobs  map[string]string
	// Namespaces are the Nomad namespaces that may use the VC, each with
	// its limits (binding.go); none: every namespace, without limits.
	Namespaces []Binding

	// MaxGracePeriod bounds the grace period of the VC's jobs (0: none
	// but Nomad's max_kill_timeout; grace.go).
	MaxGracePeriod time.Duration

	pos, pinPos, policyPos, knobsPos, gracePos string // where the block and its attributes are, when parsed
}

// PolicyPos is where the policy attribute is ("file:line,col"), or "" for a
// config built in code.
func (v VCConfig) PolicyPos() string { return cmp.Or(v.policyPos, v.pos) }

// KnobsPos is where the knobs attribute is, or "".
func (v VCConfig) KnobsPos() string { return cmp.Or(v.knobsPos, v.pos) }

// CellCount asks for Count cells of type Type.
type CellCount struct {
	Type  string
	Count int

	pos string
}

func (cfg *Config) gpuType() string {
	if cfg.GPUType == "" {
		return DefaultGPUType
	}
	return cfg.GPUType
}

// validate checks what does not need the cluster (configs built in code get
// the same checks the parser makes).
func (cfg *Config) validate() error {
	if cfg.GPUType != "" {
		if err := checkName(cfg.GPUType, "/"); err != nil {
			return fmt.Errorf("hived: gpu_type: %w", err)
		}
	}
	if len(cfg.Namespaces) > 0 && len(cfg.VCs) > 0 {
		return fmt.Errorf("hived: %snamespace blocks at the top level bind a config without virtual clusters: bind namespaces inside each vc block", at(cfg.Namespaces[0].pos))
	}
	if err := validBindings(cfg.Namespaces, "the config"); err != nil {
		return err
	}
	seen := map[string]bool{}
	pinned := map[string]string{}
	for _, v := range cfg.VCs {
		if err := validBindings(v.Namespaces, fmt.Sprintf("vc %q", v.Name)); err != nil {
			return err
		}
		if err := checkName(v.Name, "/"); err != nil {
			return fmt.Errorf("hived: %svc name: %w", at(v.pos), err)
		}
		if seen[v.Name] {
			return fmt.Errorf("hived: %svc %q is defined twice", at(v.pos), v.Name)
		}
		seen[v.Name] = true
		for _, cc := range v.Cells {
			if cc.Type == "" {
				return fmt.Errorf("hived: %svc %q: a cells block has no type", at(cc.pos), v.Name)
			}
			if cc.Count < 1 || cc.Count > MaxCount {
				return fmt.Errorf("hived: %svc %q: cells %q: count %d must be between 1 and %d", at(cc.pos), v.Name, cc.Type, cc.Count, MaxCount)
			}
		}
		for _, p := range v.Pin {
			if p == "" {
				return fmt.Errorf("hived: %svc %q: an empty pin", at(v.pinPos), v.Name)
			}
			if by, dup := pinned[p]; dup {
				return fmt.Errorf("hived: %svc %q: cell %q is already pinned by vc %q", at(v.pinPos), v.Name, p, by)
			}
			pinned[p] = v.Name
		}
	}
	return nil
}

// checkName accepts non-empty names without whitespace, control characters,
// quotes or any of bad.
func checkName(s, bad string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '"' || r == unicode.ReplacementChar || strings.ContainsRune(bad, r) {
			return fmt.Errorf("%q must not contain %q", s, r)
		}
	}
	return nil
}

var (
	configSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "gpu_type"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "vc", LabelNames: []string{"name"}}, {Type: "namespace", LabelNames: []string{"name"}}},
	}
	vcSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "pin"}, {Name: "policy"}, {Name: "knobs"}, {Name: "max_grace_period"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "cells"}, {Type: "namespace", LabelNames: []string{"name"}}},
	}
	cellsSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "type", Required: true}, {Name: "count", Required: true}},
	}
)

// ParseConfig parses a VC configuration file (HCL); filename is used in
// error messages. The format:
//
//	gpu_type = "gpu"          # optional: the leaf cell type's name
//
//	vc "research" {
//	  cells {                 # count cells of a type, bound lazily
//	    type  = "node8"
//	    count = 2
//	  }
//	  cells {
//	    type  = "pair2"
//	    count = 3
//	  }
//	  pin = ["rack0-n03"]     # optional: physical cells owned for good
//	  policy = "tiresias-las" # optional: the VC's queue policy
//	  knobs = {               # optional: its knobs, over the stack's
//	    "tiresias.queues" = "1h"
//	  }
//	  namespace "team-a" {    # optional: the Nomad namespaces that may
//	    max_priority = 100    # use the VC, and their limits (binding.go)
//	    classes = ["be"]
//	  }
//	}
//
// A config without vc blocks may have top-level namespace blocks: they
// bind the cluster's one default virtual cluster.
//
// Every problem found is reported, each as "file:line,col-col: summary;
// detail". Cell types and pins are checked against the cluster by New.
func ParseConfig(filename string, src []byte) (*Config, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, topology.DiagError("VC config", diags)
	}
	content, diags := file.Body.Content(configSchema)
	p := parser{topology.Diags{List: diags}}
	cfg := &Config{}
	if attr, ok := content.Attributes["gpu_type"]; ok {
		if p.Decode(attr, &cfg.GPUType) {
			if err := checkName(cfg.GPUType, "/"); err != nil {
				p.Errorf(attr.Expr.Range(), "Invalid gpu_type", "gpu_type: %v", err)
			}
		}
	}
	vcAt := map[string]hcl.Range{}
	pinAt := map[string]string{}
	cfg.Namespaces, _ = p.namespaces("", content.Blocks)
	for _, block := range content.Blocks {
		if block.Type != "vc" {
			continue
		}
		v, ok := p.vc(block, pinAt)
		if !ok {
			continue
		}
		if prev, dup := vcAt[v.Name]; dup {
			p.Errorf(block.LabelRanges[0], "Duplicate vc", "vc %q is already defined at %s", v.Name, prev)
			continue
		}
		vcAt[v.Name] = block.DefRange
		cfg.VCs = append(cfg.VCs, v)
	}
	if i := slices.IndexFunc(content.Blocks, func(b *hcl.Block) bool { return b.Type == "namespace" }); i >= 0 && len(cfg.VCs) > 0 {
		p.Errorf(content.Blocks[i].DefRange, "Misplaced namespace", "namespace blocks at the top level bind a config without virtual clusters: with vc blocks, bind namespaces inside each vc block")
	}
	if p.List.HasErrors() {
		return nil, topology.DiagError("VC config", p.List)
	}
	return cfg, nil
}

// parser collects diagnostics while decoding blocks.
type parser struct{ topology.Diags }

func (p *parser) vc(block *hcl.Block, pinAt map[string]string) (VCConfig, bool) {
	v := VCConfig{Name: block.Labels[0], pos: rangeString(block.DefRange)}
	ok := true
	if err := checkName(v.Name, "/"); err != nil {
		p.Errorf(block.LabelRanges[0], "Invalid vc name", "vc name: %v", err)
		ok = false
	}
	content, diags := block.Body.Content(vcSchema)
	p.List = append(p.List, diags...)
	ok = ok && !diags.HasErrors()
	for _, cb := range content.Blocks {
		if cb.Type != "cells" {
			continue
		}
		cc, cok := p.cells(v.Name, cb)
		ok = ok && cok
		v.Cells = append(v.Cells, cc)
	}
	var nok bool
	v.Namespaces, nok = p.namespaces(fmt.Sprintf("vc %q: ", v.Name), content.Blocks)
	ok = ok && nok && p.maxGrace(&v, content.Attributes)
	if attr, set := content.Attributes["policy"]; set {
		v.policyPos = rangeString(attr.Expr.Range())
		if p.Decode(attr, &v.Policy) {
			if err := checkName(v.Policy, ""); err != nil {
				p.Errorf(attr.Expr.Range(), "Invalid policy", "vc %q: policy: %v", v.Name, err)
				ok = false
			}
		} else {
			ok = false
		}
	}
	if attr, set := content.Attributes["knobs"]; set {
		v.knobsPos = rangeString(attr.Expr.Range())
		if p.Decode(attr, &v.Knobs) {
			for key := range v.Knobs {
				if err := checkName(key, "="); err != nil {
					p.Errorf(attr.Expr.Range(), "Invalid knob", "vc %q: knobs: key %v", v.Name, err)
					ok = false
				}
			}
			if len(v.Knobs) == 0 {
				v.Knobs = nil
			}
		} else {
			ok = false
		}
	}
	if attr, set := content.Attributes["pin"]; set {
		v.pinPos = rangeString(attr.Expr.Range())
		if !p.Decode(attr, &v.Pin) {
			return v, false
		}
		if len(v.Pin) == 0 {
			v.Pin = nil
		}
		for _, name := range v.Pin {
			if name == "" {
				p.Errorf(attr.Expr.Range(), "Invalid pin", "vc %q: a pin must name a cell", v.Name)
				ok = false
				continue
			}
			if prev, dup := pinAt[name]; dup {
				p.Errorf(attr.Expr.Range(), "Duplicate pin", "vc %q: cell %q is already pinned at %s", v.Name, name, prev)
				ok = false
				continue
			}
			pinAt[name] = v.pinPos
		}
	}
	return v, ok
}

func (p *parser) cells(vcName string, block *hcl.Block) (CellCount, bool) {
	cc := CellCount{pos: rangeString(block.DefRange)}
	content, diags := block.Body.Content(cellsSchema)
	p.List = append(p.List, diags...)
	if diags.HasErrors() {
		return cc, false
	}
	typeAttr, countAttr := content.Attributes["type"], content.Attributes["count"]
	ok := p.Decode(typeAttr, &cc.Type)
	if ok && cc.Type == "" {
		p.Errorf(typeAttr.Expr.Range(), "Invalid cell type", "vc %q: cells.type must name a cell type", vcName)
		ok = false
	}
	if ok {
		cc.pos = rangeString(typeAttr.Expr.Range())
	}
	if !p.Decode(countAttr, &cc.Count) {
		return cc, false
	}
	if cc.Count < 1 || cc.Count > MaxCount {
		p.Errorf(countAttr.Expr.Range(), "Invalid cell count", "vc %q: cells %q: count %d must be between 1 and %d", vcName, cc.Type, cc.Count, MaxCount)
		ok = false
	}
	return cc, ok
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", r.Filename, r.Start.Line, r.Start.Column)
}

// FormatConfig renders cfg as HCL that ParseConfig reads back to the same
// configuration (so tools can generate VC files).
func FormatConfig(cfg *Config) []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	if cfg.GPUType != "" {
		body.SetAttributeValue("gpu_type", cty.StringVal(cfg.GPUType))
	}
	for i, v := range cfg.VCs {
		if i > 0 || cfg.GPUType != "" {
			body.AppendNewline()
		}
		vb := body.AppendNewBlock("vc", []string{v.Name}).Body()
		for _, cc := range v.Cells {
			cb := vb.AppendNewBlock("cells", nil).Body()
			cb.SetAttributeValue("type", cty.StringVal(cc.Type))
			cb.SetAttributeValue("count", cty.NumberIntVal(int64(cc.Count)))
		}
		if v.Policy != "" {
			vb.SetAttributeValue("policy", cty.StringVal(v.Policy))
		}
		formatGrace(vb, v)
		if len(v.Knobs) > 0 {
			knobs := make(map[string]cty.Value, len(v.Knobs))
			for key, val := range v.Knobs {
				knobs[key] = cty.StringVal(val)
			}
			vb.SetAttributeValue("knobs", cty.MapVal(knobs))
		}
		if len(v.Pin) > 0 {
			pins := make([]cty.Value, len(v.Pin))
			for j, p := range v.Pin {
				pins[j] = cty.StringVal(p)
			}
			vb.SetAttributeValue("pin", cty.ListVal(pins))
		}
		formatBindings(vb, v.Namespaces)
	}
	formatBindings(body, cfg.Namespaces)
	return hclwrite.Format(f.Bytes())
}
