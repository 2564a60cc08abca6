package hived

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
)

func types(c *Cluster) []string {
	var out []string
	for _, t := range c.Types() {
		s := t.Name
		if t.Child != "" {
			s += "=" + t.Level + "(" + t.Child + "x" + itoa(t.Count) + ")"
		}
		out = append(out, s)
	}
	return out
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func TestCellTypes(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		want    []string
	}{
		// 8-GPU nodes: a switch holds one pair, so the pair stands for it.
		{"r4n16g8", []string{"gpu", "pair2=pair(gpux2)", "socket4=socket(pair2x2)", "node8=node(socket4x2)", "rack128=rack(node8x16)", "cluster512=cluster(rack128x4)"}},
		// A rack of 2 4-GPU nodes; the cluster of one rack is that rack.
		{"n2g4", []string{"gpu", "pair2=pair(gpux2)", "node4=node(pair2x2)", "rack8=rack(node4x2)"}},
	} {
		cl, err := cluster.FromPresetOrFile(tc.cluster)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(cl.Nodes, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := types(c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: types %v, want %v", tc.cluster, got, tc.want)
		}
	}
	// Mixed node sizes: racks of either size share a level and a size, so
	// their names say what they hold; the cluster is an untyped group.
	cl, err := cluster.Mixed("mixed",
		cluster.NodeGroup{Count: 16, GPUsPerNode: 4, NodesPerRack: 16},
		cluster.NodeGroup{Count: 8, GPUsPerNode: 8, NodesPerRack: 8})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cl.Nodes, &Config{GPUType: "V100"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"V100", "pair2=pair(V100x2)", "node4=node(pair2x2)", "socket4=socket(pair2x2)", "node8=node(socket4x2)",
		"rack64-16xnode4=rack(node4x16)", "rack64-8xnode8=rack(node8x8)"}
	if got := types(c); !reflect.DeepEqual(got, want) {
		t.Errorf("mixed: types %v, want %v", got, want)
	}
	if c.root.typ != nil || len(c.pool[c.typeByName["rack64-16xnode4"].idx]) != 1 {
		t.Errorf("the mixed cluster should be an untyped group over two free racks")
	}
}

func TestCellTree(t *testing.T) {
	node := func(id, rack string, paths ...[]string) core.Node {
		n := core.Node{ID: id, Rack: rack, Schedulable: true}
		for i, p := range paths {
			n.GPUs = append(n.GPUs, core.GPU{ID: id + "-g" + itoa(i), Index: i, Path: p, Healthy: true})
		}
		return n
	}
	nodes := []core.Node{
		// A rack of one node is the node; a switch of one pair is the pair.
		node("a", "r0", []string{"sock0", "sw0", "pair0"}, []string{"sock0", "sw0", "pair0"}, []string{"sock0", "sw1", "pair1"}, []string{"sock0", "sw1", "pair1"}),
		// Mixed children: an untyped node whose pair and GPU are free cells.
		node("b", "r1", []string{"pair0"}, []string{"pair0"}, nil),
		node("c", "r1", []string{"pair0"}, []string{"pair0"}, nil),
		// A 1-GPU node without a rack is a GPU cell.
		node("d", ""),
	}
	nodes[3].GPUs = []core.GPU{{ID: "d-g0", Healthy: true}}
	nodes[2].Schedulable = false // its GPUs start bad
	c, err := New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range c.Physical() {
		got[v.Name] = v.Type + "|" + strings.Join(v.Aliases, ",") + "|" + string(v.State)
	}
	want := map[string]string{
		"cluster":           "|" + "|bad",
		"a/sock0":           "sock4|a,r0|free",
		"a/sock0/sw0/pair0": "pair2|a/sock0/sw0|free",
		"a/sock0/sw1/pair1": "pair2|a/sock0/sw1|free",
		"a-g0":              "gpu||free",
		"r1":                "|" + "|bad",
		"b":                 "||free",
		"b/pair0":           "pair2||free",
		"b-g2":              "gpu||free",
		"c":                 "||bad",
		"d-g0":              "gpu|d|free",
		"a-g1":              "gpu||free",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("cell %s: %q, want %q", name, got[name], w)
		}
	}
	if _, err := New(nodes, &Config{VCs: []VCConfig{{Name: "x", Pin: []string{"r0", "b/pair0", "d"}}}}); err != nil {
		t.Errorf("pins by alias: %v", err)
	}
	if _, err := New(nil, nil); err == nil || !strings.Contains(err.Error(), "no GPUs") {
		t.Errorf("no nodes: %v", err)
	}
	dup := []core.Node{node("a", "r", nil), node("a", "r", nil)}
	if _, err := New(dup, nil); err == nil || !strings.Contains(err.Error(), `node "a" is listed twice`) {
		t.Errorf("duplicate node: %v", err)
	}
	dupGPU := []core.Node{node("a", "r", nil), node("b", "r", nil)}
	dupGPU[1].GPUs[0].ID = "a-g0"
	if _, err := New(dupGPU, nil); err == nil || !strings.Contains(err.Error(), `GPU ID "a-g0" is used twice`) {
		t.Errorf("duplicate GPU: %v", err)
	}
}

func TestViews(t *testing.T) {
	cl, _ := cluster.FromPresetOrFile("n2g8")
	cfg, err := ParseConfig("v.hcl", []byte("vc \"a\" {\n  cells {\n    type  = \"socket4\"\n    count = 2\n  }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cl.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Allocate(Request{Job: key("j1"), VC: "a", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Allocate(Request{Job: key("o1"), GPUs: 8, Priority: Opportunistic}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetHealthy("rack0-n1-g7", false); err != nil {
		t.Fatal(err)
	}
	states := map[string]CellView{}
	for _, v := range c.Physical() {
		states[v.Name] = v
	}
	sock := lca(c, allGPUs(a)).parent
	for name, want := range map[string]string{
		sock.name:          "used a 2 [default/j1]",
		"rack0-n0-g0":      "used a 1 [default/j1]",
		"rack0-n0-g2":      "reserved a 0 []",
		"rack0-n0/socket1": "free  0 []",
		"rack0-n1":         "bad  8 [default/o1]", // o1 keeps the GPU gone bad
		"rack0-n1-g0":      "used  1 [default/o1]",
		"rack0-n1-g7":      "bad  1 [default/o1]",
		"rack0":            "bad  10 [default/j1 default/o1]",
	} {
		v := states[name]
		if got := fmt.Sprintf("%s %s %d %v", v.State, v.VC, v.Used, keysOf(v.Jobs)); got != want {
			t.Errorf("cell %s: %q, want %q", name, got, want)
		}
	}
	vcells, err := c.VirtualCells("a")
	if err != nil {
		t.Fatal(err)
	}
	if v := vcells[0]; v.Name != "a/socket4.0" || v.State != StateUsed || v.Bound != sock.name || v.Node != "rack0-n0" {
		t.Errorf("virtual %+v", v)
	}
	if v := vcells[len(vcells)-1]; v.Name != "a/socket4.1/pair2.1/gpu.1" || v.State != StateFree || v.Bound != "" || v.Parent != "a/socket4.1/pair2.1" {
		t.Errorf("virtual %+v", v)
	}
	if _, err := c.VirtualCells("b"); err == nil {
		t.Error("unknown VC: no error")
	}
	vcs := c.VCs()
	if len(vcs) != 1 || vcs[0].GPUs != 8 || vcs[0].Used != 2 || vcs[0].Free != 6 || vcs[0].Cells["socket4"] != 2 {
		t.Errorf("VCs %+v", vcs)
	}
	if c.Free("a") != 6 || c.Free("b") != 0 || c.IdleGPUs() != 6 || c.GPUs() != 16 || c.Healthy("rack0-n1-g7") {
		t.Errorf("Free %d, IdleGPUs %d", c.Free("a"), c.IdleGPUs())
	}
	jobs := c.Jobs()
	if len(jobs) != 2 || jobs[0].Job != key("j1") || jobs[0].VC != "a" || jobs[1].Priority != Opportunistic {
		t.Errorf("Jobs %+v", jobs)
	}
	if g := a.Grant(); g.Node != "rack0-n0" || len(g.GPUs) != 2 || a.GPUs() != 2 {
		t.Errorf("Grant %+v", g)
	}
}

func keysOf(ks []core.JobKey) []string {
	out := []string{}
	for _, k := range ks {
		out = append(out, k.String())
	}
	return out
}

func TestQuotaCells(t *testing.T) {
	cl, _ := cluster.FromPresetOrFile("r4n16g8") // 64 node8 cells
	for _, tc := range []struct {
		demand map[string]float64
		want   map[string]int
	}{
		{map[string]float64{"a": 1, "b": 1, "c": 2}, map[string]int{"a": 16, "b": 16, "c": 32}},
		{map[string]float64{"a": 1, "b": 1, "c": 1}, map[string]int{"a": 22, "b": 21, "c": 21}},
		// Every VC with demand gets a cell, taken from the largest share.
		{map[string]float64{"a": 1000, "b": 1, "c": 0}, map[string]int{"a": 63, "b": 1, "c": 0}},
		{map[string]float64{"a": 0}, map[string]int{"a": 0}},
	} {
		got, err := QuotaCells(tc.demand, cl.Nodes, "node8")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.demand, got, tc.want)
		}
		// The result is a feasible assignment.
		cfg := &Config{}
		for name, n := range got {
			if n > 0 {
				cfg.VCs = append(cfg.VCs, VCConfig{Name: name, Cells: []CellCount{{Type: "node8", Count: n}}})
			}
		}
		if _, err := New(cl.Nodes, cfg); err != nil {
			t.Errorf("%v: %v", tc.demand, err)
		}
	}
	if _, err := QuotaCells(map[string]float64{"a": 1}, cl.Nodes, "node4"); err == nil {
		t.Error("unknown type: no error")
	}
	if _, err := QuotaCells(map[string]float64{"a": -1}, cl.Nodes, "node8"); err == nil {
		t.Error("negative demand: no error")
	}
	// Fewer cells than VCs: no minimum.
	small, _ := cluster.FromPresetOrFile("n2g8")
	got, err := QuotaCells(map[string]float64{"a": 3, "b": 2, "c": 1}, small.Nodes, "node8")
	if err != nil || !reflect.DeepEqual(got, map[string]int{"a": 1, "b": 1, "c": 0}) {
		t.Errorf("%v %v", got, err)
	}
}

// TestQuotaMix splits GPUs across node8 and node4 cells: philly-64 has 6
// node8 and 4 node4 cells (64 GPUs, 16 units of 4).
func TestQuotaMix(t *testing.T) {
	cl, err := cluster.FromPresetOrFile("philly-64")
	if err != nil {
		t.Fatal(err)
	}
	got, err := QuotaMix(map[string]float64{"a": 10, "b": 5, "c": 1, "d": 0}, cl.Nodes, []string{"node4", "node8"})
	if err != nil {
		t.Fatal(err)
	}
	// Units 16: a 10, b 5, c 1 (largest remainder: 10 + 5 + 1). a takes
	// 5 node8; b 1 node8 (no node8 left then) and 3 node4; c 1 node4.
	want := map[string][]CellCount{
		"a": {{Type: "node8", Count: 5}},
		"b": {{Type: "node8", Count: 1}, {Type: "node4", Count: 3}},
		"c": {{Type: "node4", Count: 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	cfg := &Config{}
	for _, name := range []string{"a", "b", "c"} {
		cfg.VCs = append(cfg.VCs, VCConfig{Name: name, Cells: got[name]})
	}
	if _, err := New(cl.Nodes, cfg); err != nil {
		t.Errorf("not feasible: %v", err)
	}
	if _, err := QuotaMix(map[string]float64{"a": 1}, cl.Nodes, []string{"rack99"}); err == nil {
		t.Error("unknown type: no error")
	}
}
