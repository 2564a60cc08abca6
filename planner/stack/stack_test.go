package stack

import (
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/quota"
)

// TestPlacementsBuildOneWay: every virtual-cluster placement builds its
// placer through NewPlacer, only hived-overflow overflows, and the live
// planner refuses all but hived.
func TestPlacementsBuildOneWay(t *testing.T) {
	cl, err := cluster.Uniform("two", 1, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	vcs := &hived.Config{VCs: []hived.VCConfig{
		{Name: "a", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
		{Name: "b", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
	}}
	for _, p := range Placements() {
		s, err := Build("fifo", Options{VCs: vcs, Placement: p})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		pl, err := s.NewPlacer(cl.Nodes)
		if err != nil {
			t.Fatalf("%s: NewPlacer: %v", p, err)
		}
		switch pl.(type) {
		case *hived.Placer:
			if p != PlaceHived && p != PlaceHivedOverflow {
				t.Errorf("%s: placer %T", p, pl)
			}
		case *quota.Placer:
			if p != PlaceQuota && p != PlaceQuotaYARN && p != PlaceQuotaGandiva {
				t.Errorf("%s: placer %T", p, pl)
			}
		default:
			t.Errorf("%s: placer %T", p, pl)
		}
		if got := s.Planner().Overflow; got != (p == PlaceHivedOverflow) {
			t.Errorf("%s: Planner().Overflow = %v", p, got)
		}
		if live := s.Live(); (live == nil) != (p == PlaceHived) {
			t.Errorf("%s: Live() = %v", p, live)
		}
	}
	if _, err := Build("fifo", Options{VCs: vcs, Placement: "quota-tiresias"}); err == nil || !strings.Contains(err.Error(), "quota-yarn") {
		t.Errorf("unknown placement: %v, want an error that lists the known ones", err)
	}
}
