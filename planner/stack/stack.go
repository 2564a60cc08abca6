// Package stack builds what decides, one way for the simulator and the live
// planner: a queue policy (by name and knobs), or with virtual clusters one
// per VC (a VC config's `policy` and `knobs`, composed by core.PerVC), its
// choice among victims, and how virtual clusters place jobs (none, HiveD
// cells, or GPU quotas).
// `themis sim` and `themis planner` both build through Build, so a policy
// or knob either works in both or is refused in both with the same
// message; the live planner then asks Live what it cannot carry out, and
// refuses that at start instead of dropping an action.
//
//	name + knobs (+ VC config) -> Build -> Stack{Policy, Caps, Traits, Victims, Placement}
//	Stack.Scheduler()          -> core.Scheduler (the simulator and the live loop)
//	Stack.NewPlacer(nodes)     -> hived.Placer | quota.Placer | nil
//	Stack.NewLiveCells(nodes)  -> hived.Cluster (the live planner places on a clone each round)
//	Stack.Live()               -> nil, or why the live planner cannot run it
package stack

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/quota"
	"github.com/themis-nomad/themis/planner/sim/leased"
)

// Placement is how virtual clusters share the cluster.
type Placement string

const (
	// PlaceFree places jobs on any free GPUs (no virtual clusters).
	PlaceFree Placement = ""
	// PlaceHived gives each VC its cells, bound by HiveD's buddy
	// allocation (package hived).
	PlaceHived Placement = "hived"
	// PlaceQuota caps each VC at its cells' GPU count, placed anywhere
	// (the HiveD paper's quota baseline, package quota).
	PlaceQuota Placement = "quota"
	// PlaceHivedOverflow is PlaceHived with opportunistic overflow: a job
	// that does not fit its VC's cells runs on idle GPUs of the cluster as
	// an opportunistic job, preempted when a guaranteed job needs them.
	PlaceHivedOverflow Placement = "hived-overflow"
	// PlaceQuotaYARN is PlaceQuota with YARN's Capacity Scheduler's
	// placement as the HiveD paper ran it: first fit over the cluster, no
	// topology preference (quota.FirstFit).
	PlaceQuotaYARN Placement = "quota-yarn"
	// PlaceQuotaGandiva is PlaceQuota with Gandiva's affinity placement
	// (quota.Affinity): a node running only jobs of the same size, else an
	// idle node, else the least loaded one.
	PlaceQuotaGandiva Placement = "quota-gandiva"
)

// Placements lists the virtual-cluster placements.
func Placements() []Placement {
	return []Placement{PlaceHived, PlaceHivedOverflow, PlaceQuota, PlaceQuotaYARN, PlaceQuotaGandiva}
}

// Overflows reports whether jobs overflow their VCs (core.Scheduler.Overflow).
func (p Placement) Overflows() bool { return p == PlaceHivedOverflow }

// Stack is a built decision stack.
type Stack struct {
	// Name is the policy's name as given.
	Name   string
	Policy core.Policy
	// Caps is Policy's capabilities, resolved once: the live planner and
	// the simulator use them rather than ask the policy's type.
	Caps   core.Capabilities
	Traits Traits
	// Leased: Policy runs on sim.realloc's leases (package planner/sim/leased), a
	// simulator baseline.
	Leased bool
	// Victims and VictimTie are the choice among victims (knobs
	// preempt.victims, preempt.tie).
	Victims   core.VictimOrder
	VictimTie float64
	// Placement and VCs: how virtual clusters place jobs (VCs is nil for
	// PlaceFree).
	Placement Placement
	VCs       *hived.Config
	// Tenants is the VC config whose namespace bindings say who may use
	// which virtual cluster and whose progress reports the Themis filter
	// may rank by (hived.Config.Admit, TrustsProgress; live only): VCs, or
	// a config of top-level namespace blocks only (then VCs is nil). Nil
	// without a VC config.
	Tenants *hived.Config
	// VCPolicies are the VCs that run a policy of their own (the VC
	// config's policy or knobs); Policy is then a core.PerVC over them.
	VCPolicies map[string]VCPolicy

	// defaultCaps is the capabilities of the policy of the VCs without
	// their own (Policy before its per-VC composition).
	defaultCaps core.Capabilities
}

// VCPolicy is a virtual cluster's own policy.
type VCPolicy struct {
	Name   string
	Policy core.Policy
	Caps   core.Capabilities
	Traits Traits
	Leased bool
	// At is where the VC config names it ("file:line,col: "), for errors.
	At string
}

// Options are what a stack is built from besides the policy's name.
type Options struct {
	Knobs core.Knobs
	// VCs and Placement: virtual clusters (nil: none) and how they share
	// the cluster (PlaceHived when VCs is set and Placement is empty). A
	// config without vc blocks binds namespaces only (Stack.Tenants): the
	// stack then has no virtual clusters.
	VCs       *hived.Config
	Placement Placement
}

// Build builds the stack for a policy name. Unknown names, bad knobs and
// combinations the core cannot carry out are errors that name them; knobs
// the stack does not use are left for the caller's Knobs.Unused check (a
// simulation passes one set of knobs to several policies).
func Build(name string, o Options) (*Stack, error) {
	sem, err := Semantics(o.Knobs)
	if err != nil {
		return nil, err
	}
	if sem == SemanticsTiresias {
		return buildPeer(name, o)
	}
	e, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("policy %q: unknown (known: %s)", name, strings.Join(Names(), ", "))
	}
	p, err := e.newPolicy(o.Knobs)
	if err != nil {
		return nil, err
	}
	// sim.realloc: a preemptive ranking policy on leases, as the Themis
	// paper ran its baselines (package planner/sim/leased).
	realloc, err := leased.FromKnobs(o.Knobs)
	if err != nil {
		return nil, err
	}
	p, onLeases, err := leased.Wrap(p, realloc)
	if err != nil {
		return nil, err
	}
	victims, tie, err := core.VictimsFromKnobs(o.Knobs)
	if err != nil {
		return nil, err
	}
	s := &Stack{Name: name, Policy: p, Traits: e.traits, Leased: onLeases, Victims: victims, VictimTie: tie, VCs: o.VCs, Tenants: o.VCs, Placement: o.Placement}
	if s.VCs != nil && len(s.VCs.VCs) == 0 && len(s.VCs.Namespaces) > 0 {
		s.VCs = nil // namespace bindings of the default virtual cluster only
	}
	if s.VCs != nil && s.Placement == PlaceFree {
		s.Placement = PlaceHived
	}
	switch {
	case s.Placement != PlaceFree && !slices.Contains(Placements(), s.Placement):
		return nil, fmt.Errorf("virtual-cluster placement %q: want one of %s", s.Placement, placementNames())
	case s.Placement != PlaceFree && s.VCs == nil:
		return nil, errors.New("virtual-cluster placement " + string(s.Placement) + " needs a VC config")
	case s.Placement != PlaceFree && e.caps.Allocator != nil:
		return nil, fmt.Errorf("policy %q allocates GPUs itself, which virtual clusters (placement %s) cannot carry out: their placer places every job; with a VC config use one of: %s",
			name, s.Placement, strings.Join(withPlacer(), ", "))
	}
	if s.VCs != nil {
		if err := s.buildVCPolicies(o.Knobs, realloc); err != nil {
			return nil, err
		}
	}
	if s.Placement.Overflows() {
		if err := s.overflowable(); err != nil {
			return nil, err
		}
	}
	s.Caps = s.Policy.Capabilities()
	return s, nil
}

// Of is the stack of policy p as built by its caller, without virtual
// clusters, knobs or a registry name (tests, and policies wrapped for a
// record): p's capabilities resolved, as Build resolves them.
func Of(p core.Policy) *Stack {
	return &Stack{Name: p.Name(), Policy: p, Caps: p.Capabilities()}
}

// overflowable refuses, with opportunistic overflow, policies that preempt
// or make room inside a VC: the core counts a guaranteed job that
// overflowed its VC in the VC's run set and among its victims, though it
// holds none of the VC's cells.
func (s *Stack) overflowable() error {
	why := func(name, at string, c core.Capabilities) error {
		if !c.Policy.Preemptive() && c.RoomMaker == nil {
			return nil
		}
		return fmt.Errorf("%spolicy %q %s inside its virtual clusters, which placement %s does not carry out yet (the core cannot tell a job that overflowed its VC from one in its VC's cells); use placement %s, or a policy that neither preempts nor makes room",
			at, name, what(c), PlaceHivedOverflow, PlaceHived)
	}
	for _, v := range s.VCs.VCs {
		if _, own := s.VCPolicies[v.Name]; !own {
			if err := why(s.Name, "", s.defaultCaps); err != nil {
				return err
			}
			break
		}
	}
	for _, vc := range slices.Sorted(maps.Keys(s.VCPolicies)) {
		v := s.VCPolicies[vc]
		if err := why(v.Name, v.At+fmt.Sprintf("vc %q: ", vc), v.Caps); err != nil {
			return err
		}
	}
	return nil
}

// buildVCPolicies builds the policy of each VC that names one, or knobs of
// its own, through the registry as the top-level policy is built, and
// composes them (core.PerVC). Errors name the VC config's file:line and
// field.
func (s *Stack) buildVCPolicies(k core.Knobs, realloc float64) error {
	own := map[string]core.Policy{}
	for _, v := range s.VCs.VCs {
		if v.Policy == "" && len(v.Knobs) == 0 {
			continue
		}
		name, where := v.Policy, at(v.PolicyPos())
		if name == "" {
			name, where = s.Name, at(v.KnobsPos())
		}
		e, ok := lookup(name)
		if !ok {
			return fmt.Errorf("%svc %q: policy %q: unknown (known: %s)", where, v.Name, name, strings.Join(Names(), ", "))
		}
		if e.caps.Allocator != nil {
			return fmt.Errorf("%svc %q: policy %q allocates GPUs itself, which a virtual cluster cannot carry out (its placer places every job); a VC's policy is one of: %s",
				where, v.Name, name, strings.Join(withPlacer(), ", "))
		}
		vk := k.Scoped(v.Knobs)
		p, err := e.newPolicy(vk)
		onLeases := false
		if err == nil {
			p, onLeases, err = leased.Wrap(p, realloc)
		}
		if err != nil {
			return fmt.Errorf("%svc %q: %w", at(v.KnobsPos()), v.Name, err)
		}
		keys := make([]string, 0, len(v.Knobs))
		for key := range v.Knobs {
			keys = append(keys, key)
		}
		if err := vk.UnusedOf(keys); err != nil {
			return fmt.Errorf("%svc %q: knobs: %w (policy %q reads no such knob)", at(v.KnobsPos()), v.Name, err, name)
		}
		if s.VCPolicies == nil {
			s.VCPolicies = map[string]VCPolicy{}
		}
		s.VCPolicies[v.Name] = VCPolicy{Name: name, Policy: p, Caps: p.Capabilities(), Traits: e.traits, Leased: onLeases, At: where}
		own[v.Name] = p
	}
	s.defaultCaps = s.Policy.Capabilities()
	s.Policy = core.NewPerVC(s.Policy, own)
	return nil
}

func at(pos string) string {
	if pos == "" {
		return ""
	}
	return pos + ": "
}

// Scheduler is the decision core for the stack, without a placer (see
// NewPlacer): callers add theirs and their own flags (ExplainWaits,
// SingleNode).
func (s *Stack) Scheduler() core.Scheduler {
	return core.Scheduler{Policy: s.Policy, Victims: s.Victims, VictimTie: s.VictimTie, Overflow: s.Placement.Overflows()}
}

// NewPlacer builds the stack's placer for a cluster's nodes: nil without
// virtual clusters, else HiveD's cells or GPU quotas of the VC config. A
// VC config the nodes cannot satisfy is an error with the missing counts.
func (s *Stack) NewPlacer(nodes []core.Node) (core.Placer, error) {
	return NewPlacer(s.Placement, s.VCs, nodes)
}

// NewPlacer builds a virtual-cluster placement's placer for a cluster's
// nodes (nil for PlaceFree); the simulator's shared runs build theirs here
// too.
func NewPlacer(p Placement, vcs *hived.Config, nodes []core.Node) (core.Placer, error) {
	if p == PlaceFree {
		return nil, nil
	}
	if !slices.Contains(Placements(), p) {
		return nil, fmt.Errorf("virtual-cluster placement %q: want one of %s", p, placementNames())
	}
	c, err := hived.New(nodes, vcs)
	if err != nil {
		return nil, err
	}
	switch p {
	case PlaceHived, PlaceHivedOverflow:
		return hived.NewPlacer(c), nil
	}
	quotas := map[string]int{}
	for _, v := range c.VCs() {
		quotas[v.Name] = v.GPUs
	}
	switch p {
	case PlaceQuotaYARN:
		return quota.NewFit(quotas, quota.FirstFit), nil
	case PlaceQuotaGandiva:
		return quota.NewFit(quotas, quota.Affinity), nil
	}
	return quota.New(quotas), nil
}

// NewLiveCells builds the cells the live planner places on: HiveD's
// (PlaceHived, or PlaceHivedOverflow, which Live refuses for now); other
// placements are refused. The planner places with hived.NewPlacer on a
// clone of them each round (planner/vcs.go).
func (s *Stack) NewLiveCells(nodes []core.Node) (*hived.Cluster, error) {
	if s.Placement != PlaceHived && s.Placement != PlaceHivedOverflow {
		return nil, fmt.Errorf("placement %s does not run live", s.Placement)
	}
	return hived.New(nodes, s.VCs)
}

func placementNames() string {
	var names []string
	for _, p := range Placements() {
		names = append(names, string(p))
	}
	return strings.Join(names, ", ")
}

var (
	_ core.Placer = (*hived.Placer)(nil)
	_ core.Placer = (*quota.Placer)(nil)
)

// Live says why the live planner cannot run the stack, or nil when it can:
// the top-level policy, then each VC's own, by name.
func (s *Stack) Live() error {
	if err := s.live(); err != nil {
		return err
	}
	for _, vc := range slices.Sorted(maps.Keys(s.VCPolicies)) {
		v := s.VCPolicies[vc]
		vs := &Stack{Name: v.Name, Policy: v.Policy, Caps: v.Caps, Traits: v.Traits, Leased: v.Leased}
		if err := vs.live(); err != nil {
			return fmt.Errorf("%svc %q: %w", v.At, vc, err)
		}
	}
	return nil
}

func (s *Stack) live() error {
	switch {
	case s.Traits.SimulatorOnly:
		return fmt.Errorf("policy %q under sim.semantics=%s is the Tiresias simulator's discipline, for the simulator only", s.Name, SemanticsTiresias)
	case s.Traits.NeedsRemaining:
		return fmt.Errorf("policy %q ranks by remaining time, which live jobs do not report; live policies: %s",
			s.Name, strings.Join(LiveNames(), ", "))
	case s.Leased:
		return fmt.Errorf("policy %q with sim.realloc (reallocation on leases) is a simulator baseline of the Themis paper; the live planner reallocates at every event", s.Name)
	case s.Placement == PlaceQuota || s.Placement == PlaceQuotaYARN || s.Placement == PlaceQuotaGandiva:
		return fmt.Errorf("virtual-cluster placement %s is a simulator baseline; the live planner places virtual clusters with hived", s.Placement)
	case s.Placement == PlaceHivedOverflow:
		return errors.New("virtual-cluster placement hived-overflow runs in the simulator only for now; the live planner places virtual clusters with hived (opportunistic overflow goes live with the one-stack HiveD work)")
	}
	return nil
}

// Names lists the policies Build knows.
func Names() []string {
	names := make([]string, 0, len(registry))
	for _, e := range registry {
		names = append(names, e.name)
	}
	return names
}

// LiveNames lists the policies the live planner runs.
func LiveNames() []string {
	var out []string
	for _, e := range registry {
		if !e.traits.NeedsRemaining {
			out = append(out, e.name)
		}
	}
	return out
}

// withPlacer lists the policies that run with virtual clusters.
func withPlacer() []string {
	var out []string
	for _, e := range registry {
		if e.caps.Allocator == nil {
			out = append(out, e.name)
		}
	}
	return out
}

// what says in words what makes a policy unfit for a placer.
func what(c core.Capabilities) string {
	var w []string
	if c.Policy.Preemptive() {
		w = append(w, "preempts running jobs")
	}
	if c.RoomMaker != nil {
		w = append(w, "preempts to make room")
	}
	if c.Allocator != nil {
		w = append(w, "allocates GPUs itself")
	}
	return strings.Join(w, " and ")
}
