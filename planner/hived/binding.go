package hived

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/themis-nomad/themis/planner/spec"
)

// Tenants bound to their virtual clusters (docs/hived.md, "Who may use a
// virtual cluster"). A job's stanza names its virtual cluster, priority
// and class, and its user writes the stanza: left at that, any team could
// claim another team's VC and its guaranteed cells, at the top priority.
// So, as Kueue binds a namespace's LocalQueue to a ClusterQueue, the VC
// config binds each VC to the Nomad namespaces that may use it, each with
// the highest priority, the classes and whether opportunistic jobs are
// allowed, and whether the Themis filter may rank by its jobs' progress
// reports; the namespace is Nomad's, which the user's ACL token fixes, not
// the stanza's:
//
//	vc "trial" {
//	  cells { ... }
//	  namespace "team-trial" {       # a Nomad namespace, or "*": any other
//	    max_priority   = 1000        # default: 1000, the stanza's highest
//	    classes        = ["te", "be"] # default: every class
//	    opportunistic  = true        # default: true
//	    trust_progress = false       # default: false
//	  }
//	}
//
// A VC without namespace blocks is closed: no namespace may use it (fail
// closed; before #45 it was open to every namespace, without limits), and
// namespace "*" {} opens it to every namespace. A config without vc blocks
// binds the one default virtual cluster with top-level namespace blocks
// (the same fields), and is closed without them; without a VC config,
// every namespace may use the cluster.

// Binding lets a Nomad namespace use a virtual cluster.
type Binding struct {
	// Namespace is a Nomad namespace, or AnyNamespace.
	Namespace string
	// MaxPriority is the highest themis.priority its jobs may ask for.
	MaxPriority int
	// Classes are the themis.class values its jobs may use (nil: all).
	Classes []string
	// Opportunistic says whether its jobs may be opportunistic (priority
	// -1: idle GPUs anywhere, preempted when a guaranteed job needs them).
	Opportunistic bool
	// TrustProgress says whether the Themis filter ranks its jobs' apps by
	// the progress they report (else as-run: docs/themis.md).
	TrustProgress bool

	pos string
}

// AnyNamespace binds every namespace that has no binding of its own.
const AnyNamespace = "*"

// NewBinding is a binding of namespace with the defaults: every priority
// and class, opportunistic jobs allowed, progress not trusted.
func NewBinding(namespace string) Binding {
	return Binding{Namespace: namespace, MaxPriority: spec.MaxPriority, Opportunistic: true}
}

// Pos is where the binding's block is ("file:line,col"), or "" for one
// built in code.
func (b Binding) Pos() string { return b.pos }

// binding is the binding of namespace among bs: its own, else "*"; ok is
// false when neither is there.
func binding(bs []Binding, namespace string) (Binding, bool) {
	star := -1
	for i, b := range bs {
		if b.Namespace == namespace {
			return b, true
		}
		if b.Namespace == AnyNamespace {
			star = i
		}
	}
	if star >= 0 {
		return bs[star], true
	}
	return Binding{}, false
}

// Admit checks a job's claim, from its namespace, on virtual cluster vc
// (ignored without vc blocks) with priority prio and class class, against
// the config's bindings: nil, or an error naming the field, the namespace
// and the rule (and where the rule is written).
func (cfg *Config) Admit(namespace, vc string, prio int, class string) error {
	if cfg == nil {
		return nil
	}
	bs, what, pos := cfg.Namespaces, "this cluster", ""
	if len(cfg.VCs) > 0 {
		i := slices.IndexFunc(cfg.VCs, func(v VCConfig) bool { return v.Name == vc })
		if i < 0 {
			names := make([]string, len(cfg.VCs))
			for j, v := range cfg.VCs {
				names[j] = v.Name
			}
			return fmt.Errorf("themis.vc: virtual cluster %q is not configured (configured: %s)", vc, strings.Join(names, ", "))
		}
		bs, what, pos = cfg.VCs[i].Namespaces, fmt.Sprintf("virtual cluster %q", vc), cfg.VCs[i].pos
	}
	field := "themis.vc"
	if len(cfg.VCs) == 0 {
		field = "namespace"
	}
	if len(bs) == 0 {
		// Fail closed: an operator who wrote a VC config and bound no
		// namespace has said nothing about who may use it.
		return fmt.Errorf("%s: namespace %q may not use %s: the VC config binds no namespace to it, and with a VC config what is unbound is closed (%s): bind namespaces in it, or write namespace \"*\" {} to open it to every namespace",
			field, namespace, what, cfg.where(pos))
	}
	b, ok := binding(bs, namespace)
	if !ok {
		names := make([]string, len(bs))
		for i, b := range bs {
			names[i] = fmt.Sprintf("%q", b.Namespace)
		}
		return fmt.Errorf("%s: namespace %q may not use %s: the VC config binds it to namespace %s only (%s)",
			field, namespace, what, strings.Join(names, ", "), cfg.where(bs[0].pos))
	}
	switch {
	case prio < 0 && !b.Opportunistic:
		return fmt.Errorf("themis.priority: %d (opportunistic): namespace %q may not run opportunistic jobs in %s (opportunistic = false, %s)",
			prio, namespace, what, cfg.where(b.pos))
	case prio > b.MaxPriority:
		return fmt.Errorf("themis.priority: %d is above the highest priority namespace %q may use in %s (max_priority = %d, %s)",
			prio, namespace, what, b.MaxPriority, cfg.where(b.pos))
	case b.Classes != nil && !slices.Contains(b.Classes, class):
		return fmt.Errorf("themis.class: namespace %q may not submit class %q to %s (classes = [%s], %s)",
			namespace, class, what, quoted(b.Classes), cfg.where(b.pos))
	}
	return nil
}

// TrustsProgress reports whether the Themis filter may rank the jobs of
// namespace in virtual cluster vc by their progress reports: only where a
// binding says trust_progress = true.
func (cfg *Config) TrustsProgress(namespace, vc string) bool {
	if cfg == nil {
		return false
	}
	bs := cfg.Namespaces
	if len(cfg.VCs) > 0 {
		i := slices.IndexFunc(cfg.VCs, func(v VCConfig) bool { return v.Name == vc })
		if i < 0 {
			return false
		}
		bs = cfg.VCs[i].Namespaces
	}
	b, ok := binding(bs, namespace)
	return ok && b.TrustProgress
}

// where names the VC config line of a binding for an error.
func (cfg *Config) where(pos string) string {
	if pos == "" {
		return "the VC config"
	}
	return "the VC config at " + pos
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// validBindings checks a list of bindings (a VC's, or the top level's):
// what names the list's owner in errors.
func validBindings(bs []Binding, what string) error {
	seen := map[string]bool{}
	for _, b := range bs {
		if b.Namespace != AnyNamespace {
			if err := checkName(b.Namespace, "/"); err != nil {
				return fmt.Errorf("hived: %s%s: namespace name: %w", at(b.pos), what, err)
			}
		}
		if seen[b.Namespace] {
			return fmt.Errorf("hived: %s%s: namespace %q is bound twice", at(b.pos), what, b.Namespace)
		}
		seen[b.Namespace] = true
		if b.MaxPriority < spec.PriorityOpportunistic || b.MaxPriority > spec.MaxPriority {
			return fmt.Errorf("hived: %s%s: namespace %q: max_priority %d must be from %d to %d", at(b.pos), what, b.Namespace, b.MaxPriority, spec.PriorityOpportunistic, spec.MaxPriority)
		}
		for _, c := range b.Classes {
			if c != string(spec.ClassBestEffort) && c != string(spec.ClassTrialAndError) {
				return fmt.Errorf("hived: %s%s: namespace %q: classes: %q is not a class (want %q or %q)", at(b.pos), what, b.Namespace, c, spec.ClassBestEffort, spec.ClassTrialAndError)
			}
		}
	}
	return nil
}

var namespaceSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "max_priority"}, {Name: "classes"}, {Name: "opportunistic"}, {Name: "trust_progress"}},
}

// namespace parses a namespace block (of a vc block, or top-level); owner
// names where it is in errors.
func (p *parser) namespace(owner string, block *hcl.Block) (Binding, bool) {
	b := NewBinding(block.Labels[0])
	b.pos = rangeString(block.DefRange)
	ok := true
	if b.Namespace != AnyNamespace {
		if err := checkName(b.Namespace, "/"); err != nil {
			p.Errorf(block.LabelRanges[0], "Invalid namespace", "%snamespace name: %v", owner, err)
			ok = false
		}
	}
	content, diags := block.Body.Content(namespaceSchema)
	p.List = append(p.List, diags...)
	ok = ok && !diags.HasErrors()
	if attr, set := content.Attributes["max_priority"]; set {
		if !p.Decode(attr, &b.MaxPriority) {
			ok = false
		} else if b.MaxPriority < spec.PriorityOpportunistic || b.MaxPriority > spec.MaxPriority {
			p.Errorf(attr.Expr.Range(), "Invalid max_priority", "%snamespace %q: max_priority %d must be from %d (opportunistic jobs only) to %d",
				owner, b.Namespace, b.MaxPriority, spec.PriorityOpportunistic, spec.MaxPriority)
			ok = false
		}
	}
	if attr, set := content.Attributes["classes"]; set {
		b.Classes = []string{}
		if !p.Decode(attr, &b.Classes) {
			ok = false
		}
		for _, c := range b.Classes {
			if c != string(spec.ClassBestEffort) && c != string(spec.ClassTrialAndError) {
				p.Errorf(attr.Expr.Range(), "Invalid class", "%snamespace %q: classes: %q is not a class (want %q, best effort, or %q, trial and error)",
					owner, b.Namespace, c, spec.ClassBestEffort, spec.ClassTrialAndError)
				ok = false
			}
		}
	}
	for name, dst := range map[string]*bool{"opportunistic": &b.Opportunistic, "trust_progress": &b.TrustProgress} {
		if attr, set := content.Attributes[name]; set && !p.Decode(attr, dst) {
			ok = false
		}
	}
	return b, ok
}

// namespaces parses the namespace blocks of a body (owner names it in
// errors), reporting a namespace bound twice.
func (p *parser) namespaces(owner string, blocks hcl.Blocks) ([]Binding, bool) {
	var out []Binding
	ok := true
	at := map[string]hcl.Range{}
	for _, block := range blocks {
		if block.Type != "namespace" {
			continue
		}
		b, bok := p.namespace(owner, block)
		ok = ok && bok
		if prev, dup := at[b.Namespace]; dup {
			p.Errorf(block.LabelRanges[0], "Duplicate namespace", "%snamespace %q is already bound at %s", owner, b.Namespace, prev)
			ok = false
			continue
		}
		at[b.Namespace] = block.DefRange
		out = append(out, b)
	}
	return out, ok
}

// formatBindings writes bindings as namespace blocks of body, leaving out
// the defaults.
func formatBindings(body *hclwrite.Body, bs []Binding) {
	for _, b := range bs {
		nb := body.AppendNewBlock("namespace", []string{b.Namespace}).Body()
		if b.MaxPriority != spec.MaxPriority {
			nb.SetAttributeValue("max_priority", cty.NumberIntVal(int64(b.MaxPriority)))
		}
		if b.Classes != nil {
			cs := make([]cty.Value, len(b.Classes))
			for i, c := range b.Classes {
				cs[i] = cty.StringVal(c)
			}
			if len(cs) == 0 {
				nb.SetAttributeValue("classes", cty.ListValEmpty(cty.String))
			} else {
				nb.SetAttributeValue("classes", cty.ListVal(cs))
			}
		}
		if !b.Opportunistic {
			nb.SetAttributeValue("opportunistic", cty.False)
		}
		if b.TrustProgress {
			nb.SetAttributeValue("trust_progress", cty.True)
		}
	}
}
