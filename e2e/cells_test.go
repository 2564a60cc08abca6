package e2e

import (
	"slices"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/nomad"
)

// TestCellsFromFingerprints builds HiveD's physical cells from what the
// device plugin fingerprints on a real Nomad agent (no hand-typed cell
// list): the dev node's 8 GPUs (2 sockets x 2 switches x 1 NVLink pair) give
// the cell types node8 > socket4 > pair2 > gpu, and a virtual cluster can own
// the node.
func TestCellsFromFingerprints(t *testing.T) {
	stubs, _, err := env.nomad.Nodes().List(&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []core.Node
	for _, s := range stubs {
		n, ok, err := nomad.NodeFromNomad(s)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			nodes = append(nodes, n)
		}
	}
	c, err := hived.New(nodes, &hived.Config{VCs: []hived.VCConfig{{Name: "team", Cells: []hived.CellCount{{Type: "node8", Count: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ty := range c.Types() {
		types = append(types, ty.Name)
	}
	for _, want := range []string{"node8", "socket4", "pair2"} {
		if !slices.Contains(types, want) {
			t.Errorf("cell types %v lack %s", types, want)
		}
	}
	a, err := c.Allocate(hived.Request{Job: core.JobKey{Namespace: "default", ID: "pair"}, VC: "team", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if g := a.Grant(); len(g.GPUs) != 2 {
		t.Errorf("allocation %v, want 2 GPUs of one pair", g)
	}
}
