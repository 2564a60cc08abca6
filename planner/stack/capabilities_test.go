package stack

import (
	"testing"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/sim/peer"
)

// has lists, by field, which capabilities c has, and which p implements:
// a policy that has a method set but does not state it (an embedded
// policy's Capabilities, or a field forgotten) shows up as a difference.
func has(c core.Capabilities) map[string]bool {
	return map[string]bool{
		"Promoter": c.Promoter != nil, "Rechecker": c.Rechecker != nil, "Steady": c.Steady != nil, "RoomMaker": c.RoomMaker != nil,
		"GangRoom": c.GangRoom != nil, "Allocator": c.Allocator != nil, "Learner": c.Learner != nil,
		"Leveler": c.Leveler != nil, "State": c.State != nil, "LeaseEnder": c.LeaseEnder != nil,
		"Resumer": c.Resumer != nil, "Reporter": c.Reporter != nil, "Seeder": c.Seeder != nil, "Failer": c.Failer != nil,
	}
}

func implements(p core.Policy) map[string]bool {
	_, promoter := p.(core.Promoter)
	_, rechecker := p.(core.RecheckAfter)
	_, steady := p.(core.Steady)
	_, room := p.(core.Preemptor)
	_, gang := p.(core.GangPreemptor)
	_, alloc := p.(core.Allocator)
	_, learner := p.(core.Learner)
	_, leveler := p.(core.Leveler)
	_, state := p.(core.Stateful)
	_, ender := p.(core.LeaseEnder)
	_, resumer := p.(core.Resumer)
	_, reporter := p.(core.Reporter)
	_, seeder := p.(core.Seeder)
	_, failer := p.(core.Failer)
	return map[string]bool{
		"Promoter": promoter, "Rechecker": rechecker, "Steady": steady, "RoomMaker": room, "GangRoom": gang, "Allocator": alloc,
		"Learner": learner, "Leveler": leveler, "State": state, "LeaseEnder": ender, "Resumer": resumer,
		"Reporter": reporter, "Seeder": seeder, "Failer": failer,
	}
}

func sameCaps(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s = %v, want %v", what, k, got[k], w)
		}
	}
}

// TestCapabilitiesAreTheirPolicys: every policy the registry and the peer
// semantics build states its own capabilities (Capabilities.Policy is the
// policy itself, not one it embeds), every capability its type has, and
// the registry's static ones (from the type's zero value) are the built
// policy's.
func TestCapabilitiesAreTheirPolicys(t *testing.T) {
	for _, e := range registry {
		p, err := NewPolicy(e.name, core.Knobs{})
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		c := p.Capabilities()
		if c.Policy != p {
			t.Errorf("%s: Capabilities().Policy is %T, not the policy (%T)", e.name, c.Policy, p)
		}
		sameCaps(t, e.name+" (methods)", has(c), implements(p))
		sameCaps(t, e.name+" (static)", has(e.caps), has(c))
	}
	for name := range peer.Names {
		if name == "dlas-gpu-gittins" || name == "tiresias-gittins" {
			continue // needs the peer's sample file
		}
		for _, scheme := range []string{"count", "yarn"} {
			k, err := core.ParseKnobs([]string{"sim.scheme=" + scheme})
			if err != nil {
				t.Fatal(err)
			}
			p, err := peer.New(name, k, nil)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, scheme, err)
			}
			c := p.Capabilities()
			if c.Policy != p {
				t.Errorf("%s/%s: Capabilities().Policy is %T, not the policy (%T)", name, scheme, c.Policy, p)
			}
			sameCaps(t, name+"/"+scheme, has(c), implements(p))
		}
	}
}

// TestPerVCCapabilities: a per-VC composition has a capability when one of
// its VCs' policies has it, and Of gives each VC's own.
func TestPerVCCapabilities(t *testing.T) {
	vcs := map[string]core.Policy{}
	for _, name := range []string{"fitgpp", "tiresias-las"} {
		p, err := NewPolicy(name, core.Knobs{})
		if err != nil {
			t.Fatal(err)
		}
		vcs[name] = p
	}
	c := core.NewPerVC(policies.FIFO{}, vcs).Capabilities()
	if c.RoomMaker == nil || c.Promoter == nil || c.Rechecker == nil || c.Seeder == nil {
		t.Errorf("per-VC capabilities %+v: want room, promotion, recheck and seeding from its VCs", has(c))
	}
	if c.Allocator != nil || c.State != nil || c.Learner != nil {
		t.Errorf("per-VC capabilities %+v: no allocator, state or learner at the composition", has(c))
	}
	if got := c.Of("fitgpp"); got.RoomMaker == nil || got.Promoter != nil {
		t.Errorf("Of(fitgpp) = %+v, want FitGpp's", has(got))
	}
	if got := c.Of("tiresias-las"); got.Learner == nil || got.RoomMaker != nil {
		t.Errorf("Of(tiresias-las) = %+v, want Tiresias's", has(got))
	}
	if got := c.Of("other"); got.Policy != (policies.FIFO{}) || got.RoomMaker != nil {
		t.Errorf("Of(other) = %+v, want the default's", has(got))
	}
	plain := core.NewPerVC(policies.FIFO{}, map[string]core.Policy{"a": policies.LAS{}}).Capabilities()
	if plain.RoomMaker != nil || plain.Promoter != nil || plain.Rechecker != nil {
		t.Errorf("per-VC of fifo and las: %+v, want no room, promotion or recheck", has(plain))
	}
}
