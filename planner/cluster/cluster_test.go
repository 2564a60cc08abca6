package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

// checkCluster checks what every built cluster promises: unique node IDs and
// names, unique GPU IDs, racks set, nodes schedulable, GPUs healthy and
// indexed 0..n-1, and node names sorted in build order.
func checkCluster(t *testing.T, c *Cluster) {
	t.Helper()
	nodes, gpus := map[string]bool{}, map[string]bool{}
	for i, n := range c.Nodes {
		if n.ID == "" || n.Name == "" || n.Rack == "" || !n.Schedulable || len(n.GPUs) == 0 {
			t.Fatalf("node %d: %+v", i, n)
		}
		if nodes["id:"+n.ID] || nodes["name:"+n.Name] {
			t.Fatalf("node %q: duplicate ID or name", n.Name)
		}
		nodes["id:"+n.ID], nodes["name:"+n.Name] = true, true
		if i > 0 && c.Nodes[i-1].Name >= n.Name {
			t.Errorf("node names out of order: %q, %q", c.Nodes[i-1].Name, n.Name)
		}
		for j, g := range n.GPUs {
			if g.ID == "" || gpus[g.ID] || !g.Healthy || g.Index != j {
				t.Fatalf("node %q GPU %d: %+v (duplicate: %v)", n.Name, j, g, gpus[g.ID])
			}
			gpus[g.ID] = true
			want := NodePath(len(n.GPUs), j)
			if strings.HasPrefix(c.Name, "themis") {
				want = ThemisSlotPath(len(n.GPUs), j)
			}
			if !slices.Equal(g.Path, want) {
				t.Errorf("node %q GPU %d: path %v, want %v", n.Name, j, g.Path, want)
			}
		}
	}
}

// shape counts nodes by GPUs per node, and racks.
func shape(c *Cluster) (byGPUs map[int]int, racks int) {
	byGPUs = map[int]int{}
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		byGPUs[len(n.GPUs)]++
		seen[n.Rack] = true
	}
	return byGPUs, len(seen)
}

func TestPresets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gpus   int
		byGPUs map[int]int
		racks  int
	}{
		{"n2g4", 8, map[int]int{4: 2}, 1},
		{"n8g8", 64, map[int]int{8: 8}, 1},
		{"philly", 480, map[int]int{4: 20, 8: 50}, 2 + 7},
		{"philly-full", 2400, map[int]int{4: 100, 8: 250}, 7 + 32},
		{"philly-256", 256, map[int]int{4: 12, 8: 26}, 1 + 4},
		{"fitgpp84", 672, map[int]int{8: 84}, 7},
		{"themis", 256, map[int]int{8: 24, 4: 10, 1: 24}, 3 + 1 + 1},
		{"themis-footnote", 168, map[int]int{8: 16, 4: 6, 1: 16}, 2 + 1 + 1},
		{"themis-fig18", 64, map[int]int{8: 1, 2: 28}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Preset(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			checkCluster(t, c)
			byGPUs, racks := shape(c)
			if c.Name != tc.name || c.TotalGPUs() != tc.gpus || racks != tc.racks || !mapsEqual(byGPUs, tc.byGPUs) {
				t.Errorf("%s: %d GPUs, nodes by size %v, %d racks; want %d, %v, %d", c.Name, c.TotalGPUs(), byGPUs, racks, tc.gpus, tc.byGPUs, tc.racks)
			}
		})
	}
	if !slices.Equal(Presets(), []string{"fitgpp84", "n2g4", "n8g8", "philly", "philly-256", "philly-full", "themis", "themis-fig18", "themis-footnote"}) {
		t.Errorf("presets %v", Presets())
	}
	_, err := Preset("nope")
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "fitgpp84, n2g4, n8g8, philly, philly-256, philly-full, themis, themis-fig18, themis-footnote") {
		t.Errorf("err = %v", err)
	}
}

func mapsEqual(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestPresetsAreFresh(t *testing.T) {
	a, _ := Preset("n2g4")
	a.Nodes[0].GPUs[0].Path[0] = "mutated"
	b, _ := Preset("n2g4")
	if b.Nodes[0].GPUs[0].Path[0] != "socket0" {
		t.Error("presets share state")
	}
	if &a.Nodes[0].GPUs[0].Path[0] == &a.Nodes[0].GPUs[1].Path[0] {
		t.Error("GPUs share path slices")
	}
}

func TestNodePath(t *testing.T) {
	for _, tc := range []struct {
		gpus, index int
		want        []string
	}{
		{8, 0, []string{"socket0", "switch0", "pair0"}},
		{8, 3, []string{"socket0", "switch1", "pair1"}},
		{8, 5, []string{"socket1", "switch2", "pair2"}},
		{8, 7, []string{"socket1", "switch3", "pair3"}},
		{4, 1, []string{"socket0", "pair0"}},
		{4, 2, []string{"socket1", "pair1"}},
		{2, 1, []string{"pair0"}},
		{1, 0, nil},
		{6, 3, nil},
		{16, 9, nil},
		{8, 8, nil},
		{8, -1, nil},
	} {
		if got := NodePath(tc.gpus, tc.index); !slices.Equal(got, tc.want) {
			t.Errorf("NodePath(%d, %d) = %v, want %v", tc.gpus, tc.index, got, tc.want)
		}
	}
}

func TestBuildNames(t *testing.T) {
	c, err := Uniform("u", 12, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	checkCluster(t, c)
	first, last := c.Nodes[0], c.Nodes[len(c.Nodes)-1]
	if first.Name != "rack00-n0" || first.Rack != "rack00" || first.GPUs[1].ID != "rack00-n0-g1" ||
		last.Name != "rack11-n2" || last.Rack != "rack11" || len(c.Nodes) != 36 {
		t.Errorf("first %+v, last %+v, %d nodes", first, last, len(c.Nodes))
	}
	// Partial last rack; NodesPerRack 0 is one rack for the group.
	c, err = Mixed("m", NodeGroup{Count: 5, GPUsPerNode: 1, NodesPerRack: 2}, NodeGroup{Count: 3, GPUsPerNode: 6})
	if err != nil {
		t.Fatal(err)
	}
	checkCluster(t, c)
	var racks []string
	for _, n := range c.Nodes {
		racks = append(racks, n.Rack)
	}
	want := []string{"rack0", "rack0", "rack1", "rack1", "rack2", "rack3", "rack3", "rack3"}
	if !slices.Equal(racks, want) || c.TotalGPUs() != 5+18 {
		t.Errorf("racks %v, want %v; %d GPUs", racks, want, c.TotalGPUs())
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func() (*Cluster, error)
		want  string
	}{
		{"no groups", func() (*Cluster, error) { return Mixed("x") }, "no node groups"},
		{"zero count", func() (*Cluster, error) { return Mixed("x", NodeGroup{Count: 0, GPUsPerNode: 8}) }, "must be positive"},
		{"zero gpus", func() (*Cluster, error) { return Uniform("x", 1, 2, 0) }, "must be positive"},
		{"negative per rack", func() (*Cluster, error) { return Mixed("x", NodeGroup{Count: 1, GPUsPerNode: 8, NodesPerRack: -1}) }, "not negative"},
		{"zero racks", func() (*Cluster, error) { return Uniform("x", 0, 2, 8) }, "must be positive"},
		{"too big", func() (*Cluster, error) { return Uniform("x", 1<<20, 1<<20, 8) }, "more than"},
		{"too many gpus", func() (*Cluster, error) { return Mixed("x", NodeGroup{Count: 1 << 18, GPUsPerNode: 8}) }, "more than 1048576 GPUs"},
		{"philly odd", func() (*Cluster, error) { return PhillyScaled(250) }, "multiple of 4"},
		{"philly zero", func() (*Cluster, error) { return PhillyScaled(0) }, "multiple of 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.build()
			if err == nil || c != nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, %v; want error containing %q", c, err, tc.want)
			}
		})
	}
}

func TestPhillyScaled(t *testing.T) {
	for _, gpus := range []int{4, 8, 12, 48, 64, 128, 256, 512, 1000, 1024, 2400, 4800} {
		c, err := PhillyScaled(gpus)
		if err != nil {
			t.Fatal(err)
		}
		checkCluster(t, c)
		byGPUs, _ := shape(c)
		if c.TotalGPUs() != gpus || len(byGPUs) > 2 || byGPUs[4]+byGPUs[8] != len(c.Nodes) {
			t.Fatalf("PhillyScaled(%d): %d GPUs, nodes by size %v", gpus, c.TotalGPUs(), byGPUs)
		}
		// One GPU in six on 4-GPU nodes, within one node.
		if share := float64(4*byGPUs[4]) / float64(gpus); gpus >= 256 && (share < 1.0/6-8.0/float64(gpus) || share > 1.0/6+8.0/float64(gpus)) {
			t.Errorf("PhillyScaled(%d): 4-GPU share %.3f, want about 1/6", gpus, share)
		}
	}
}

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		spec         string
		nodes, total int
		err          string
	}{
		{"n8g8", 8, 64, ""},
		{"r4n16g8", 64, 512, ""},
		{"r2n3g1", 6, 6, ""},
		{"n8g0", 0, 0, "must be positive"},
		{"r0n8g8", 0, 0, "must be positive"},
		{"n99999999999999999999g8", 0, 0, "too large"},
		{"8x8", 0, 0, "not a cluster spec"},
		{"", 0, 0, "not a cluster spec"},
	} {
		c, err := ParseSpec(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSpec(%q): err %v, want %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		checkCluster(t, c)
		if c.Name != tc.spec || len(c.Nodes) != tc.nodes || c.TotalGPUs() != tc.total {
			t.Errorf("ParseSpec(%q): %s, %d nodes, %d GPUs", tc.spec, c.Name, len(c.Nodes), c.TotalGPUs())
		}
	}
}

func TestLoad(t *testing.T) {
	files, _ := filepath.Glob("../../device/testdata/*.hcl")
	files = append(files, "../../examples/topology/dev-node.hcl")
	if len(files) < 2 {
		t.Fatalf("topology files missing: %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != filepath.Base(f) || len(c.Nodes) == 0 {
				t.Fatalf("%+v", c)
			}
			ids := map[string]bool{}
			for _, n := range c.Nodes {
				if n.ID != n.Name || n.Rack == "" || !n.Schedulable {
					t.Errorf("node %+v", n)
				}
				for _, g := range n.GPUs {
					if ids[g.ID] {
						t.Errorf("duplicate GPU %q", g.ID)
					}
					ids[g.ID] = true
				}
			}
		})
	}
}

func TestLoadDevNode(t *testing.T) {
	c, err := Load("../../examples/topology/dev-node.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 1 || c.TotalGPUs() != 8 {
		t.Fatalf("%d nodes, %d GPUs", len(c.Nodes), c.TotalGPUs())
	}
	// The dev node is laid out like a built 8-GPU node.
	n := c.Nodes[0]
	if n.Name != "dev-node" || n.Rack != "rack0" {
		t.Errorf("node %q rack %q", n.Name, n.Rack)
	}
	for i, g := range n.GPUs {
		if !slices.Equal(g.Path, NodePath(8, i)) || !g.Healthy || g.Index != i {
			t.Errorf("GPU %d: %+v, want path %v", i, g, NodePath(8, i))
		}
	}
}

func TestLoadTwoNodes(t *testing.T) {
	c, err := Load("../../device/testdata/two-nodes.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Node{
		{ID: "node-a", Name: "node-a", Rack: "rack0", Schedulable: true, GPUs: []core.GPU{
			{ID: "GPU-a0", Index: 0, Path: []string{"socket0", "pair0"}, Healthy: true},
			{ID: "GPU-a1", Index: 1, Path: []string{"socket0", "pair0"}, Healthy: true},
			{ID: "GPU-a2", Index: 2, Path: []string{"socket1"}, Healthy: false},
		}},
		{ID: "node-b", Name: "node-b", Rack: "rack2", Schedulable: true, GPUs: []core.GPU{
			{ID: "SIM-node-b-0", Index: 0, Path: nil, Healthy: true},
		}},
	}
	if len(c.Nodes) != len(want) {
		t.Fatalf("nodes %+v", c.Nodes)
	}
	for i, n := range c.Nodes {
		w := want[i]
		if n.ID != w.ID || n.Name != w.Name || n.Rack != w.Rack || n.Schedulable != w.Schedulable || len(n.GPUs) != len(w.GPUs) {
			t.Fatalf("node %d = %+v, want %+v", i, n, w)
		}
		for j, g := range n.GPUs {
			wg := w.GPUs[j]
			if g.ID != wg.ID || g.Index != wg.Index || !slices.Equal(g.Path, wg.Path) || g.Healthy != wg.Healthy {
				t.Errorf("node %s GPU %d = %+v, want %+v", n.Name, j, g, wg)
			}
		}
	}
}

func TestFromPresetOrFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(bad, []byte("node \"x\" {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		arg  string
		gpus int
		err  string
	}{
		{"n8g8", 64, ""},
		{"philly", 480, ""},
		{"philly-2400", 2400, ""},
		{"themis", 256, ""},
		{"r2n2g4", 16, ""},
		{"../../examples/topology/dev-node.hcl", 8, ""},
		{"n8g0", 0, "must be positive"},
		{bad, 0, "bad.hcl"},
		{dir, 0, "is not a preset (fitgpp84, n2g4, n8g8, philly, philly-256, philly-full, themis, themis-fig18, themis-footnote, philly-<GPUs>), a spec"},
		{"missing.hcl", 0, `cluster "missing.hcl" is not a preset`},
	} {
		c, err := FromPresetOrFile(tc.arg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("FromPresetOrFile(%q): err %v, want %q", tc.arg, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("FromPresetOrFile(%q): %v", tc.arg, err)
			continue
		}
		if c.TotalGPUs() != tc.gpus {
			t.Errorf("FromPresetOrFile(%q): %d GPUs, want %d", tc.arg, c.TotalGPUs(), tc.gpus)
		}
	}
}

func TestScaledPhillyPresetByName(t *testing.T) {
	c, err := FromPresetOrFile("philly-480")
	if err != nil {
		t.Fatal(err)
	}
	if c.TotalGPUs() != 480 || c.Name != "philly-480" {
		t.Fatalf("got %s with %d GPUs", c.Name, c.TotalGPUs())
	}
	for _, bad := range []string{"philly-x", "philly-6", "philly-0"} {
		if _, err := FromPresetOrFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: err %v, want an error naming it", bad, err)
		}
	}
}

func TestThemisSlotPath(t *testing.T) {
	for _, tc := range []struct {
		gpus, index int
		want        []string
	}{
		{8, 0, []string{"slot0"}},
		{8, 1, []string{"slot0"}},
		{8, 2, []string{"slot1"}},
		{8, 7, []string{"slot3"}},
		{4, 0, []string{"slot0"}},
		{4, 3, []string{"slot3"}},
		{1, 0, []string{"slot0"}},
		{2, 1, []string{"slot1"}},
		{16, 5, []string{"slot1"}},
		{8, 8, nil},
		{1, 1, nil},
		{4, -1, nil},
	} {
		if got := ThemisSlotPath(tc.gpus, tc.index); !slices.Equal(got, tc.want) {
			t.Errorf("ThemisSlotPath(%d, %d) = %v, want %v", tc.gpus, tc.index, got, tc.want)
		}
	}
}

// The themis presets have the paper's four levels: GPU, slot (the path's one
// cell), machine, rack; slots of 2 GPUs on 8-GPU machines, of 1 on 4-GPU
// machines, one slot on a 1-GPU machine; each machine shape in racks of its
// own of at most 64 GPUs.
func TestThemisPresetLevels(t *testing.T) {
	for _, tc := range []struct {
		name              string
		gpus, machines    int
		racks, rackGPUMax int
	}{
		{"themis", ThemisGPUs, 58, 5, 64},
		{"themis-footnote", ThemisFootnoteGPUs, 38, 4, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Preset(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			checkCluster(t, c)
			if c.TotalGPUs() != tc.gpus || len(c.Nodes) != tc.machines {
				t.Fatalf("%d GPUs on %d machines, want %d on %d", c.TotalGPUs(), len(c.Nodes), tc.gpus, tc.machines)
			}
			rackGPUs := map[string]int{}
			rackShape := map[string]int{}
			for _, n := range c.Nodes {
				rackGPUs[n.Rack] += len(n.GPUs)
				if s, ok := rackShape[n.Rack]; ok && s != len(n.GPUs) {
					t.Errorf("rack %s mixes %d- and %d-GPU machines", n.Rack, s, len(n.GPUs))
				}
				rackShape[n.Rack] = len(n.GPUs)
				slots := map[string]int{}
				for _, g := range n.GPUs {
					if len(g.Path) != 1 || !strings.HasPrefix(g.Path[0], "slot") {
						t.Fatalf("%s: path %v, want one slot cell", g.ID, g.Path)
					}
					slots[g.Path[0]]++
				}
				wantSlots, perSlot := map[int]int{8: 4, 4: 4, 1: 1}[len(n.GPUs)], map[int]int{8: 2, 4: 1, 1: 1}[len(n.GPUs)]
				if len(slots) != wantSlots {
					t.Errorf("%s (%d GPUs): %d slots, want %d", n.Name, len(n.GPUs), len(slots), wantSlots)
				}
				for s, k := range slots {
					if k != perSlot {
						t.Errorf("%s %s: %d GPUs, want %d", n.Name, s, k, perSlot)
					}
				}
			}
			if len(rackGPUs) != tc.racks {
				t.Errorf("%d racks, want %d", len(rackGPUs), tc.racks)
			}
			for r, g := range rackGPUs {
				if g > tc.rackGPUMax {
					t.Errorf("rack %s: %d GPUs, want at most %d", r, g, tc.rackGPUMax)
				}
			}
		})
	}
	if _, err := Themis("x", -1, 0, 1); err == nil || !strings.Contains(err.Error(), "-1 8-GPU") {
		t.Errorf("negative count: err %v", err)
	}
	if _, err := Themis("x", 0, 0, 0); err == nil {
		t.Error("no machines: want an error")
	}
	c, err := Themis("x", 0, 2, 0)
	if err != nil || c.TotalGPUs() != 8 || c.Nodes[0].Rack != "rack0" {
		t.Errorf("two 4-GPU machines: %v, %v", c, err)
	}
}

// FuzzParseSpec: a compact spec either fails (ErrNotSpec for text that is
// not one) or builds a cluster of exactly racks x nodes x GPUs, at most
// MaxGPUs, that checkCluster accepts, named after the spec.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"n8g8", "r4n16g8", "r0n1g1", "n1g0", "r99999999999n9g9", "r1048577n1g1", "n2g4x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := ParseSpec(spec)
		if err != nil {
			if c != nil {
				t.Fatalf("%q: cluster and error %v", spec, err)
			}
			return
		}
		if c.Name != spec || len(c.Nodes) == 0 || c.TotalGPUs() > MaxGPUs {
			t.Fatalf("%q: cluster %q of %d nodes, %d GPUs", spec, c.Name, len(c.Nodes), c.TotalGPUs())
		}
		per := len(c.Nodes[0].GPUs)
		for _, n := range c.Nodes {
			if len(n.GPUs) != per {
				t.Fatalf("%q: nodes of %d and %d GPUs", spec, per, len(n.GPUs))
			}
		}
		checkCluster(t, c)
	})
}
