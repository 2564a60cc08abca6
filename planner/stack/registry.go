package stack

import (
	"fmt"
	"strings"

	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/gittins"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/trace"
)

// Traits are what the registry states about a policy besides what its type
// can do (core.Capabilities, which the type states itself): what it needs
// of the jobs, and where it may run.
type Traits struct {
	// NeedsRemaining: the ranking uses jobs' remaining times (an oracle
	// the simulator has and live jobs do not report).
	NeedsRemaining bool
	// NeedsApps: the policy works on apps (hyper-parameter sweeps).
	NeedsApps bool
	// SimulatorOnly: a peer simulator's discipline (sim.semantics), kept
	// only to compare the simulators job for job.
	SimulatorOnly bool
}

// entry is one policy of the registry.
type entry struct {
	name   string
	traits Traits
	// caps is what the policy's type can do, from its zero value (known
	// before any is built: which policies run with virtual clusters).
	caps core.Capabilities
	// knobs are the knob namespaces the policy reads ("tiresias"): a knob
	// of them it did not read is an error naming it.
	knobs []string
	build func(core.Knobs) (core.Policy, error)
}

// policy registers a policy type P by its constructor. P's capabilities
// are its type's: Capabilities of its zero value, so a policy's
// Capabilities method must not read its receiver (TestRegistryStatic
// compares them with a built policy's).
func policy[P core.Policy](name string, t Traits, knobs []string, build func(core.Knobs) (P, error)) entry {
	var zero P
	return entry{name: name, traits: t, caps: zero.Capabilities(), knobs: knobs,
		build: func(k core.Knobs) (core.Policy, error) { return build(k) }}
}

// plain is a constructor for a policy without knobs.
func plain[P core.Policy](p func() P) func(core.Knobs) (P, error) {
	return func(core.Knobs) (P, error) { return p(), nil }
}

func value[P core.Policy](p P) func() P { return func() P { return p } }

// registry is the only list of the policies, in the order Names lists
// them.
var registry = []entry{
	policy("fifo", Traits{}, nil, plain(value(policies.FIFO{}))),
	policy("fifo-skip", Traits{}, nil, plain(value(policies.FIFOSkip{}))),
	policy("srtf", Traits{NeedsRemaining: true}, nil, plain(value(policies.SRTF{}))),
	policy("srsf", Traits{NeedsRemaining: true}, nil, plain(value(policies.SRSF{}))),
	policy("las", Traits{}, nil, plain(value(policies.LAS{}))),
	policy("gandiva", Traits{}, nil, plain(value(policies.Gandiva{}))),
	policy("tiresias-las", Traits{}, []string{"tiresias"}, tiresias(false)),
	policy("tiresias-gittins", Traits{}, []string{"tiresias"}, tiresias(true)),
	policy("fitgpp", Traits{}, []string{"fitgpp"}, policies.NewFitGpp),
	policy("lrtp", Traits{}, nil, plain(value(policies.LRTP{}))),
	policy("rand", Traits{}, nil, plain(policies.NewRandomPreempt)),
	policy("optimus", Traits{NeedsRemaining: true}, nil, plain(value(policies.Optimus{}))),
	policy("app-las", Traits{NeedsApps: true}, nil, plain(policies.NewAppLAS)),
	policy("app-srtf", Traits{NeedsApps: true, NeedsRemaining: true}, nil, plain(policies.NewAppSRTF)),
	policy("app-srsf", Traits{NeedsApps: true, NeedsRemaining: true}, nil, plain(policies.NewAppSRSF)),
	policy(arbiter.Name, Traits{NeedsApps: true}, []string{"themis"}, arbiter.FromKnobs),
}

// lookup is the registry's entry for name.
func lookup(name string) (entry, bool) {
	for _, e := range registry {
		if e.name == name {
			return e, true
		}
	}
	return entry{}, false
}

// newPolicy builds e's policy from knobs, refusing knobs of its namespaces
// it did not read.
func (e entry) newPolicy(k core.Knobs) (core.Policy, error) {
	p, err := e.build(k)
	if err != nil {
		if e.name == arbiter.Name {
			return nil, fmt.Errorf("policy %q: %w", e.name, err)
		}
		return nil, err
	}
	if err := k.UnusedIn(e.knobs...); err != nil {
		return nil, fmt.Errorf("policy %q: %w", e.name, err)
	}
	return p, nil
}

// NewPolicy builds a policy of the registry by name, configured by knobs
// ("tiresias.queues" = "3200s", ...): what Build builds, without virtual
// clusters, sim.realloc or victims. Unknown names and knobs are errors
// naming them.
func NewPolicy(name string, k core.Knobs) (core.Policy, error) {
	e, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("policy %q: unknown (known: %s)", name, strings.Join(Names(), ", "))
	}
	return e.newPolicy(k)
}

// tiresias builds Tiresias and gives 2D-Gittins its job-size distribution:
// from tiresias.gittins_dist, or learned from the jobs that finish.
func tiresias(gittinsIndex bool) func(core.Knobs) (*policies.Tiresias, error) {
	return func(k core.Knobs) (*policies.Tiresias, error) {
		t, err := policies.NewTiresias(gittinsIndex, k)
		if err != nil || !gittinsIndex {
			return t, err
		}
		if t.DistPath == "" {
			t.SetIndex(learned{gittins.NewOnline(nil)})
			return t, nil
		}
		sizes, err := trace.LoadSizes(t.DistPath)
		if err != nil {
			return nil, fmt.Errorf("tiresias.gittins_dist: %w", err)
		}
		prior, err := gittins.New(sizes)
		if err != nil {
			return nil, fmt.Errorf("tiresias.gittins_dist %s: %w", t.DistPath, err)
		}
		t.SetIndex(prior)
		return t, nil
	}
}

// learned adapts gittins.Online to the core's Learner.
type learned struct{ *gittins.Online }

func (l learned) Observe(size float64) { _ = l.Online.Observe(size) }
