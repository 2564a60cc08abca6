package stack

import (
	"fmt"
	"strings"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/gittins"
	"github.com/themis-nomad/themis/planner/themispolicy"
	"github.com/themis-nomad/themis/planner/trace"
)

// Capabilities are what a policy does beyond ranking, stated per policy in
// the registry and checked against its type at compile time below, so the
// stack knows what it composes without discovering it at run time.
type Capabilities struct {
	// Preempts: running jobs that rank below queued ones are preempted
	// (core.Policy.Preemptive).
	Preempts bool
	// MakesRoom: the policy picks victims for waiting jobs itself
	// (core.Preemptor: FitGpp and its baselines).
	MakesRoom bool
	// Allocates: the policy decides allocations itself (core.Allocator:
	// Themis).
	Allocates bool
	// Promotes starving jobs (core.Promoter), Learns job sizes from
	// finished jobs (core.Learner), Rechecks its ranking at times it names
	// (core.RecheckAfter).
	Promotes, Learns, Rechecks bool
	// NeedsRemaining: the ranking uses jobs' remaining times (an oracle
	// the simulator has and live jobs do not report).
	NeedsRemaining bool
	// NeedsApps: the policy works on apps (hyper-parameter sweeps).
	NeedsApps bool
	// SimulatorOnly: a peer simulator's discipline (sim.semantics), kept
	// only to compare the simulators job for job.
	SimulatorOnly bool
}

// what says in words what makes a policy unfit for a placer.
func (c Capabilities) what() string {
	var w []string
	if c.Preempts {
		w = append(w, "preempts running jobs")
	}
	if c.MakesRoom {
		w = append(w, "preempts to make room")
	}
	if c.Allocates {
		w = append(w, "allocates GPUs itself")
	}
	return strings.Join(w, " and ")
}

type entry struct {
	order int
	caps  Capabilities
	build func(core.Knobs) (core.Policy, error)
}

// core builds a policy of the decision core by name.
func fromCore(name string) func(core.Knobs) (core.Policy, error) {
	return func(k core.Knobs) (core.Policy, error) { return core.NewPolicy(name, k) }
}

var registry = map[string]entry{
	"fifo":             {0, Capabilities{}, fromCore("fifo")},
	"fifo-skip":        {1, Capabilities{}, fromCore("fifo-skip")},
	"srtf":             {2, Capabilities{Preempts: true, NeedsRemaining: true}, fromCore("srtf")},
	"srsf":             {3, Capabilities{Preempts: true, NeedsRemaining: true}, fromCore("srsf")},
	"las":              {4, Capabilities{Preempts: true}, fromCore("las")},
	"gandiva":          {5, Capabilities{}, fromCore("gandiva")},
	"tiresias-las":     {6, Capabilities{Preempts: true, Promotes: true, Learns: true, Rechecks: true}, tiresias("tiresias-las")},
	"tiresias-gittins": {7, Capabilities{Preempts: true, Promotes: true, Learns: true, Rechecks: true}, tiresias("tiresias-gittins")},
	"fitgpp":           {8, Capabilities{MakesRoom: true}, fromCore("fitgpp")},
	"lrtp":             {9, Capabilities{MakesRoom: true}, fromCore("lrtp")},
	"rand":             {10, Capabilities{MakesRoom: true}, fromCore("rand")},
	"optimus":          {11, Capabilities{Preempts: true, NeedsRemaining: true}, fromCore("optimus")},
	"app-las":          {12, Capabilities{Preempts: true, NeedsApps: true}, fromCore("app-las")},
	"app-srtf":         {13, Capabilities{Preempts: true, NeedsApps: true, NeedsRemaining: true}, fromCore("app-srtf")},
	"app-srsf":         {14, Capabilities{Preempts: true, NeedsApps: true, NeedsRemaining: true}, fromCore("app-srsf")},
	themispolicy.Name:  {15, Capabilities{Allocates: true, Rechecks: true, NeedsApps: true}, themisPolicy},
}

// The registry's capabilities, checked against the policies' types.
var (
	_ core.Preemptor    = (*core.FitGpp)(nil)
	_ core.Preemptor    = core.LRTP{}
	_ core.Preemptor    = (*core.RandomPreempt)(nil)
	_ core.Promoter     = (*core.Tiresias)(nil)
	_ core.Learner      = (*core.Tiresias)(nil)
	_ core.RecheckAfter = (*core.Tiresias)(nil)
	_ core.Allocator    = (*themispolicy.Policy)(nil)
	_ core.RecheckAfter = (*themispolicy.Policy)(nil)
)

// tiresias builds Tiresias and gives 2D-Gittins its job-size distribution:
// from tiresias.gittins_dist, or learned from the jobs that finish.
func tiresias(name string) func(core.Knobs) (core.Policy, error) {
	return func(k core.Knobs) (core.Policy, error) {
		p, err := core.NewPolicy(name, k)
		if err != nil {
			return nil, err
		}
		t := p.(*core.Tiresias)
		if name != "tiresias-gittins" {
			return t, nil
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

func themisPolicy(k core.Knobs) (core.Policy, error) {
	p, err := themispolicy.FromKnobs(k)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", themispolicy.Name, err)
	}
	if err := k.UnusedIn("themis"); err != nil {
		return nil, fmt.Errorf("policy %q: %w", themispolicy.Name, err)
	}
	return p, nil
}
