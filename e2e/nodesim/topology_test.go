package nodesim

import (
	"testing"

	"github.com/themis-nomad/themis/device/topology"
)

// The generated cluster is a valid topology file, and reads back the same.
func TestClusterIsAValidTopologyFile(t *testing.T) {
	want := Cluster(5, 2)
	got, err := topology.Parse([]byte(HCL(want)), "gen.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != 5 || got.Nodes[4].Rack != "rack02" || len(got.Nodes[4].GPUs) != 8 {
		t.Fatalf("read back %d nodes: %+v", len(got.Nodes), got.Nodes)
	}
	for i, n := range got.Nodes {
		for j, g := range n.GPUs {
			w := want.Nodes[i].GPUs[j]
			if g != w {
				t.Errorf("node %s GPU %d: read back %+v, generated %+v", n.Name, j, g, w)
			}
		}
	}
}
