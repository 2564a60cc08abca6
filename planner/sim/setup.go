package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/gittins"
	"github.com/themis-nomad/themis/planner/themispolicy"
	"github.com/themis-nomad/themis/planner/trace"
)

// Costs reads the simulator's knobs: sim.checkpoint_s (default 10) and
// sim.restore_s (default 20), the seconds a preempted job loses when it
// resumes.
func Costs(k core.Knobs) (checkpoint, restore float64, err error) {
	if checkpoint, err = k.Float("sim.checkpoint_s", 10); err != nil {
		return 0, 0, err
	}
	if restore, err = k.Float("sim.restore_s", 20); err != nil {
		return 0, 0, err
	}
	if checkpoint < 0 || restore < 0 || math.IsInf(checkpoint+restore, 0) {
		return 0, 0, fmt.Errorf("sim.checkpoint_s = %v, sim.restore_s = %v: want finite numbers of seconds >= 0", checkpoint, restore)
	}
	return checkpoint, restore, nil
}

// PreparePolicy does the I/O a policy needs before a run: 2D-Gittins gets
// its job-size distribution from tiresias.gittins_dist, or learns one from
// the jobs that finish during the run.
func PreparePolicy(p core.Policy) error {
	if l, ok := p.(*core.Leased); ok {
		p = l.Unwrap()
	}
	t, ok := p.(*core.Tiresias)
	if !ok || t.Name() != "tiresias-gittins" {
		return nil
	}
	var prior *gittins.Distribution
	if t.DistPath != "" {
		sizes, err := trace.LoadSizes(t.DistPath)
		if err != nil {
			return fmt.Errorf("tiresias.gittins_dist: %w", err)
		}
		if prior, err = gittins.New(sizes); err != nil {
			return fmt.Errorf("tiresias.gittins_dist %s: %w", t.DistPath, err)
		}
		t.SetIndex(prior)
		return nil
	}
	t.SetIndex(learned{gittins.NewOnline(nil)})
	return nil
}

// learned adapts gittins.Online to the core's Learner.
type learned struct{ *gittins.Online }

func (l learned) Observe(size float64) { _ = l.Online.Observe(size) }

// PolicyNames lists the policies NewPolicy knows: the core's and themis.
func PolicyNames() []string { return append(core.Names(), themispolicy.Name) }

// NewPolicy returns a policy by name: "themis" (the Themis arbiter,
// planner/themispolicy, with knobs themis.f, themis.lease, themis.lie) or
// one of the core's (core.NewPolicy), under sim.realloc's leases when set
// (core.WithRealloc). Unknown names and knobs are errors.
func NewPolicy(name string, knobs core.Knobs) (core.Policy, error) {
	realloc, err := core.ReallocFromKnobs(knobs)
	if err != nil {
		return nil, err
	}
	if name != themispolicy.Name {
		p, err := core.NewPolicy(name, knobs)
		if err != nil && strings.Contains(err.Error(), "unknown (known:") {
			return nil, fmt.Errorf("policy %q: unknown (known: %v)", name, PolicyNames())
		}
		if err != nil {
			return nil, err
		}
		return core.WithRealloc(p, realloc)
	}
	p, err := themispolicy.FromKnobs(knobs)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	if err := knobs.Unused("themis"); err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	return p, nil
}
