package topology

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadEightGPUNode(t *testing.T) {
	topo, err := Load(filepath.Join("..", "testdata", "eight-gpu.hcl"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := topo.NodeNames(); !reflect.DeepEqual(got, []string{"dgx-0"}) {
		t.Fatalf("nodes = %v", got)
	}
	node, ok := topo.Node("dgx-0")
	if !ok {
		t.Fatal("node dgx-0 not found")
	}
	if node.Rack != "rack1" || len(node.GPUs) != 8 {
		t.Fatalf("rack %q, %d gpus; want rack1, 8", node.Rack, len(node.GPUs))
	}
	for i, g := range node.GPUs {
		want := GPU{
			Index:     i,
			ID:        "SIM-dgx-0-" + string(rune('0'+i)),
			Model:     "A100-SXM4-80GB",
			MemoryMiB: 81920,
			Path:      []string{"socket0/switch0/pair0", "socket0/switch1/pair0", "socket1/switch0/pair0", "socket1/switch1/pair0"}[i/2],
			Healthy:   true,
		}
		if g != want {
			t.Errorf("gpu %d = %+v, want %+v", i, g, want)
		}
	}
}

func TestParseDefaultsAndOrder(t *testing.T) {
	topo, err := Load(filepath.Join("..", "testdata", "two-nodes.hcl"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	a, _ := topo.Node("node-a")
	b, _ := topo.Node("node-b")
	if a.Rack != DefaultRack || b.Rack != "rack2" {
		t.Errorf("racks = %q, %q; want %q, rack2", a.Rack, b.Rack, DefaultRack)
	}
	var idx []int
	for _, g := range a.GPUs {
		idx = append(idx, g.Index)
	}
	if !reflect.DeepEqual(idx, []int{0, 1, 2}) {
		t.Errorf("indexes = %v, want sorted [0 1 2]", idx)
	}
	if a.GPUs[1].PCIBusID != "00000000:3B:00.0" {
		t.Errorf("pci bus id = %q", a.GPUs[1].PCIBusID)
	}
	if g := a.GPUs[2]; g.Healthy || g.HealthDescription == "" {
		t.Errorf("gpu 2 healthy=%v desc=%q, want unhealthy with a description", g.Healthy, g.HealthDescription)
	}
	if g := b.GPUs[0]; g.ID != "SIM-node-b-0" || g.Path != "" || g.Cells() != nil {
		t.Errorf("node-b gpu = %+v, want default id and empty path", g)
	}
	if _, ok := topo.Node("nope"); ok {
		t.Error("Node(nope) found")
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.hcl")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want one naming %s", err, path)
	}
}

// gpuBlock renders a gpu block with the given attribute lines.
func gpuBlock(attrs ...string) string {
	return "  gpu {\n    " + strings.Join(attrs, "\n    ") + "\n  }\n"
}

func okGPU(index int, extra ...string) string {
	return gpuBlock(append([]string{
		"index = " + string(rune('0'+index)),
		`model = "A100"`,
		"memory_mib = 1024",
		`path = "s0/p0"`,
	}, extra...)...)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings the error must contain
	}{
		{"syntax", `node "a" {`, []string{"t.hcl:1"}},
		{"empty file", ``, []string{"no node blocks"}},
		{"no gpus", `node "a" {}`, []string{`node "a" has no gpu blocks`, "t.hcl:1"}},
		{"duplicate node", `node "a" {` + "\n" + okGPU(0) + "}\n" + `node "a" {` + "\n" + okGPU(0) + "}\n",
			[]string{`node "a" is already defined at t.hcl:1`, "t.hcl:9"}},
		{"duplicate index", "node \"a\" {\n" + okGPU(0) + okGPU(0, `id = "x"`) + "}\n",
			[]string{"gpu index 0 is already used", "t.hcl:8"}},
		{"duplicate id in node", "node \"a\" {\n" + okGPU(0, `id = "x"`) + okGPU(1, `id = "x"`) + "}\n",
			[]string{`gpu id "x" is already used`}},
		{"duplicate id across nodes", "node \"a\" {\n" + okGPU(0, `id = "x"`) + "}\nnode \"b\" {\n" + okGPU(0, `id = "x"`) + "}\n",
			[]string{`node "b": gpu id "x" is already used at t.hcl:2`}},
		{"negative index", "node \"a\" {\n" + gpuBlock("index = -1", `model = "A"`, "memory_mib = 1", `path = "p"`) + "}\n",
			[]string{"gpu index -1 must not be negative", "t.hcl:3"}},
		{"negative memory", "node \"a\" {\n" + gpuBlock("index = 0", `model = "A"`, "memory_mib = -5", `path = "p"`) + "}\n",
			[]string{"memory_mib -5 must be positive", "t.hcl:5"}},
		{"fractional index", "node \"a\" {\n" + gpuBlock("index = 1.5", `model = "A"`, "memory_mib = 1", `path = "p"`) + "}\n",
			[]string{"t.hcl:3"}},
		{"empty model", "node \"a\" {\n" + gpuBlock("index = 0", `model = ""`, "memory_mib = 1", `path = "p"`) + "}\n",
			[]string{`model "" must be non-empty`}},
		{"missing model", "node \"a\" {\n" + gpuBlock("index = 0", "memory_mib = 1", `path = "p"`) + "}\n",
			[]string{`"model" is required`}},
		{"unknown attribute", "node \"a\" {\n" + okGPU(0, `colour = "red"`) + "}\n",
			[]string{`"colour" is not expected`}},
		{"empty path segment", "node \"a\" {\n" + gpuBlock("index = 0", `model = "A"`, "memory_mib = 1", `path = "s0//p0"`) + "}\n",
			[]string{`path "s0//p0": cell 1 is empty`}},
		{"trailing slash", "node \"a\" {\n" + gpuBlock("index = 0", `model = "A"`, "memory_mib = 1", `path = "s0/"`) + "}\n",
			[]string{`cell 1 is empty`}},
		{"comma in path", "node \"a\" {\n" + gpuBlock("index = 0", `model = "A"`, "memory_mib = 1", `path = "s0,x"`) + "}\n",
			[]string{`cell "s0,x" contains ','`}},
		{"equals in path", "node \"a\" {\n" + gpuBlock("index = 0", `model = "A"`, "memory_mib = 1", `path = "s=0"`) + "}\n",
			[]string{`contains '='`}},
		{"semicolon in path", "node \"a\" {\n" + gpuBlock("index = 0", `model = "A"`, "memory_mib = 1", `path = "s;0"`) + "}\n",
			[]string{`contains ';'`}},
		{"space in path", "node \"a\" {\n" + gpuBlock("index = 0", `model = "A"`, "memory_mib = 1", `path = "s 0"`) + "}\n",
			[]string{`contains ' '`}},
		{"comma in id", "node \"a\" {\n" + okGPU(0, `id = "a,b"`) + "}\n",
			[]string{`id "a,b" contains ','`, "t.hcl:7"}},
		{"space in id", "node \"a\" {\n" + okGPU(0, `id = "a b"`) + "}\n",
			[]string{`id "a b" contains ' '`}},
		{"empty id", "node \"a\" {\n" + okGPU(0, `id = ""`) + "}\n",
			[]string{"id is empty"}},
		{"bad node name", "node \"a b\" {\n" + okGPU(0) + "}\n",
			[]string{`node name "a b"`}},
		{"bad rack", "node \"a\" {\n  rack = \"r/1\"\n" + okGPU(0) + "}\n",
			[]string{`rack "r/1"`}},
		{"variable reference", "node \"a\" {\n" + gpuBlock("index = var.x", `model = "A"`, "memory_mib = 1", `path = "p"`) + "}\n",
			[]string{"t.hcl:3"}},
		{"several problems reported together", "node \"a\" {\n" + gpuBlock("index = -1", `model = ""`, "memory_mib = 0", `path = "a//b"`) + "}\n",
			[]string{"must not be negative", "must be non-empty", "must be positive", "is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := Parse([]byte(tt.src), "t.hcl")
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want an error", topo)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseExampleFromBrief(t *testing.T) {
	src := `
node "dev-node" {
  gpu {
    index      = 0
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket0/switch0/pair0"
  }
}`
	topo, err := Parse([]byte(src), "dev.hcl")
	if err != nil {
		t.Fatal(err)
	}
	g := topo.Nodes[0].GPUs[0]
	if g.ID != "SIM-dev-node-0" || !reflect.DeepEqual(g.Cells(), []string{"socket0", "switch0", "pair0"}) {
		t.Errorf("gpu = %+v cells %v", g, g.Cells())
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"eight-gpu.hcl", "two-nodes.hcl"} {
		src, err := os.ReadFile(filepath.Join("..", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte(`node "a" { gpu { index = 0 model = "x" memory_mib = 1 path = "p" } }`))
	f.Add([]byte("node \"a\" {\n" + okGPU(0, `id = "a,b"`) + "}\n"))
	f.Add([]byte(`node "" { rack = 5 }`))
	f.Fuzz(func(t *testing.T, src []byte) {
		topo, err := Parse(src, "fuzz.hcl")
		if err != nil {
			return
		}
		// Whatever parses must satisfy the invariants the planner relies on.
		ids := map[string]bool{}
		for _, n := range topo.Nodes {
			if len(n.GPUs) == 0 {
				t.Fatalf("node %q has no gpus", n.Name)
			}
			for i, g := range n.GPUs {
				if ValidateID(g.ID) != nil || ValidatePath(g.Path) != nil || g.Index < 0 || g.MemoryMiB <= 0 || g.Model == "" {
					t.Fatalf("invalid gpu accepted: %+v", g)
				}
				if i > 0 && n.GPUs[i-1].Index >= g.Index {
					t.Fatalf("gpus not strictly sorted by index: %+v", n.GPUs)
				}
				if ids[g.ID] {
					t.Fatalf("duplicate id %q accepted", g.ID)
				}
				ids[g.ID] = true
			}
			entries, err := DecodeLayout(EncodeLayout(n.GPUs))
			if err != nil || len(entries) != len(n.GPUs) {
				t.Fatalf("layout of parsed node does not round-trip: %v", err)
			}
		}
	})
}
