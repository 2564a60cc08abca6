package hived

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig("vcs.hcl", []byte(`
gpu_type = "V100"
vc "research" {
  cells {
    type  = "node8"
    count = 2
  }
  cells {
    type  = "pair2"
    count = 3
  }
  pin = ["rack00-n03"]
}
vc "empty" {}
vc "team" {
  policy = "tiresias-las"
  knobs = {
    "tiresias.queues"      = "1h"
    "tiresias.pack_limit"  = 2
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{GPUType: "V100", VCs: []VCConfig{
		{Name: "research", Cells: []CellCount{{Type: "node8", Count: 2}, {Type: "pair2", Count: 3}}, Pin: []string{"rack00-n03"}},
		{Name: "empty"},
		{Name: "team", Policy: "tiresias-las", Knobs: map[string]string{"tiresias.queues": "1h", "tiresias.pack_limit": "2"}},
	}}
	if !reflect.DeepEqual(strip(cfg), want) {
		t.Fatalf("got %+v, want %+v", strip(cfg), want)
	}
	if cfg.VCs[0].Cells[1].pos != "vcs.hcl:9,13" {
		t.Fatalf("position %q", cfg.VCs[0].Cells[1].pos)
	}
	if p, k := cfg.VCs[2].PolicyPos(), cfg.VCs[2].KnobsPos(); p != "vcs.hcl:16,12" || k != "vcs.hcl:17,11" {
		t.Fatalf("policy at %q, knobs at %q", p, k)
	}
	back, err := ParseConfig("back.hcl", FormatConfig(cfg))
	if err != nil || !reflect.DeepEqual(strip(back), want) {
		t.Fatalf("FormatConfig does not read back: %v\n%s", err, FormatConfig(cfg))
	}
}

// strip drops the positions.
func strip(cfg *Config) *Config {
	out := &Config{GPUType: cfg.GPUType, Namespaces: stripBindings(cfg.Namespaces)}
	for _, v := range cfg.VCs {
		s := VCConfig{Name: v.Name, Pin: v.Pin, Policy: v.Policy, Knobs: v.Knobs, Namespaces: stripBindings(v.Namespaces)}
		for _, cc := range v.Cells {
			s.Cells = append(s.Cells, CellCount{Type: cc.Type, Count: cc.Count})
		}
		out.VCs = append(out.VCs, s)
	}
	return out
}

func stripBindings(bs []Binding) []Binding {
	var out []Binding
	for _, b := range bs {
		b.pos = ""
		out = append(out, b)
	}
	return out
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`vc "a" {`, "x.hcl:1,"},
		{"vc \"a\" {\n  cells {\n    type = \"node8\"\n  }\n}", `x.hcl:2,9-9: Missing required argument; The argument "count" is required`},
		{"vc \"a\" {\n  cells {\n    type = \"node8\"\n    count = 0\n  }\n}", `x.hcl:4,13-14: Invalid cell count; vc "a": cells "node8": count 0 must be between 1 and 1048576`},
		{"vc \"a\" {\n  cells {\n    type = \"node8\"\n    count = 1.5\n  }\n}", "x.hcl:4,13-16"},
		{"vc \"a\" {\n  cells {\n    type = \"\"\n    count = 1\n  }\n}", `x.hcl:3,12-14: Invalid cell type`},
		{"vc \"a\" {}\nvc \"a\" {}", `x.hcl:2,4-7: Duplicate vc; vc "a" is already defined at x.hcl:1,1-7`},
		{`vc "a/b" {}`, `Invalid vc name; vc name: "a/b" must not contain '/'`},
		{`vc "" {}`, `vc name: must not be empty`},
		{"vc \"a\" {\n  pin = [\"n0\"]\n}\nvc \"b\" {\n  pin = [\"n0\"]\n}", `x.hcl:5,9-15: Duplicate pin; vc "b": cell "n0" is already pinned at x.hcl:2,9`},
		{`vc "a" { pin = "n0" }`, `x.hcl:1,17-19: Unsuitable value type`},
		{"vc \"a\" {\n  policy = \"\"\n}", `x.hcl:2,12-14: Invalid policy; vc "a": policy: must not be empty`},
		{`vc "a" { policy = ["fifo"] }`, `x.hcl:1,19-20: Unsuitable value type; Unsuitable value: string required`},
		{"vc \"a\" {\n  knobs = { \"a=b\" = 1 }\n}", `x.hcl:2,11-24: Invalid knob; vc "a": knobs: key "a=b" must not contain '='`},
		{`vc "a" { knobs = ["x"] }`, `x.hcl:1,18-19: Unsuitable value type; Unsuitable value: map of string required`},
		{`vc "a" { oops = 1 }`, `Unsupported argument; An argument named "oops" is not expected here`},
		{`region "x" {}`, `Unsupported block type`},
		{`gpu_type = "a b"`, `Invalid gpu_type`},
		{`vc "a" { cells { type = "node8" count = 1 } }`, `x.hcl:1,`}, // one-line blocks hold one argument
	} {
		_, err := ParseConfig("x.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.src, err, tc.want)
		}
	}
	// Several problems are reported together.
	_, err := ParseConfig("x.hcl", []byte("vc \"a\" {\n  cells {\n    type = \"\"\n    count = 0\n  }\n}"))
	if err == nil || !strings.Contains(err.Error(), "Invalid cell type") || !strings.Contains(err.Error(), "Invalid cell count") {
		t.Errorf("error %v, want both problems", err)
	}
}

// TestInvalidAssignments: New rejects VC assignments the cluster cannot
// hold, naming the problem.
func TestInvalidAssignments(t *testing.T) {
	for _, tc := range []struct {
		cluster, config, want string
		infeasible            bool
	}{
		{"n2g8", "vc \"a\" {\n  cells {\n    type  = \"node16\"\n    count = 1\n  }\n}",
			`a.hcl:3,13: vc "a": unknown cell type "node16"; this cluster has gpu (16), pair2 (8), socket4 (4), node8 (2), rack16 (1)`, false},
		{"n2g8", `vc "a" {
  cells {
    type  = "node8"
    count = 2
  }
}
vc "b" {
  cells {
    type  = "node8"
    count = 1
  }
}`, `infeasible VC assignment: cell type "node8" is short by 1: the VCs ask for 3 (a 2, b 1) but the cluster can give only 2`, true},
		// The larger cells are carved first.
		{"n2g8", `vc "a" {
  cells {
    type  = "rack16"
    count = 1
  }
}
vc "b" {
  cells {
    type  = "pair2"
    count = 1
  }
}`, `cell type "pair2" is short by 1: the VCs ask for 1 (b 1) but the cluster can give only 0 of its 8 once the larger cells asked for are carved out`, true},
		{"n2g8", `vc "a" {
  pin = ["rack0-n0"]
}
vc "b" {
  cells {
    type  = "socket4"
    count = 3
  }
}`, `cell type "socket4" is short by 1: the VCs ask for 3 (b 3) but the cluster can give only 2 of its 4 once the larger cells asked for and the pinned cells are carved out`, true},
		{"n2g8", "vc \"a\" {\n  pin = [\"nope\"]\n}", `a.hcl:2,9: vc "a": pin "nope": no such cell`, false},
		{"n2g8", "vc \"a\" {\n  pin = [\"rack0-n0\"]\n}\nvc \"b\" {\n  pin = [\"rack0-n0/socket1\"]\n}",
			`a.hcl:5,9: vc "b": pin "rack0-n0/socket1" overlaps another pinned cell (rack0-n0, pinned by vc "a")`, false},
		{"philly-256", "vc \"a\" {\n  pin = [\"cluster\"]\n}", `pin "cluster": the cell is an untyped group`, false},
		// Different node sizes give different rack types.
		{"philly", `vc "a" {
  cells {
    type  = "rack64"
    count = 1
  }
}`, `unknown cell type "rack64"; this cluster has gpu (`, false},
	} {
		cl, err := cluster.FromPresetOrFile(tc.cluster)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseConfig("a.hcl", []byte(tc.config))
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(cl.Nodes, cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.config, err, tc.want)
		}
		if errors.Is(err, ErrInfeasible) != tc.infeasible {
			t.Errorf("%s: errors.Is(%v, ErrInfeasible) != %v", tc.config, err, tc.infeasible)
		}
	}
	// Configs built in code get the parser's checks.
	cl, _ := cluster.FromPresetOrFile("n2g8")
	for _, cfg := range []*Config{
		{VCs: []VCConfig{{Name: "a"}, {Name: "a"}}},
		{VCs: []VCConfig{{Name: "a", Cells: []CellCount{{Type: "node8", Count: 0}}}}},
		{VCs: []VCConfig{{Name: "a", Cells: []CellCount{{Count: 1}}}}},
		{VCs: []VCConfig{{Name: "a", Pin: []string{"rack0-n0"}}, {Name: "b", Pin: []string{"rack0-n0"}}}},
		{GPUType: "a/b"},
	} {
		if _, err := New(cl.Nodes, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestFormatConfigRoundTrip(t *testing.T) {
	cfg := &Config{GPUType: "A100", VCs: []VCConfig{
		{Name: "research", Cells: []CellCount{{Type: "node8", Count: 2}, {Type: "pair2", Count: 3}}, Pin: []string{"rack00-n03", "x/${y}"}},
		{Name: "prod", Cells: []CellCount{{Type: "rack64-8xnode8", Count: 1}}},
		{Name: "none"},
	}}
	src := FormatConfig(cfg)
	got, err := ParseConfig("out.hcl", src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	if !reflect.DeepEqual(strip(got), cfg) {
		t.Fatalf("round trip: %+v\n%s", strip(got), src)
	}
	if !strings.Contains(string(src), "vc \"research\" {\n  cells {\n    type  = \"node8\"\n    count = 2\n  }") {
		t.Fatalf("unexpected layout:\n%s", src)
	}
}

// TestExampleConfig: examples/vcs/example.hcl is valid and feasible on the
// cluster it names.
func TestExampleConfig(t *testing.T) {
	src, err := os.ReadFile("../../examples/vcs/example.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig("example.hcl", src)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Preset("philly-256")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cl.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.VCs()) != 3 || c.VCs()[2].Pinned[0] != "rack0-n11" {
		t.Fatalf("VCs %+v", c.VCs())
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"",
		`gpu_type = "gpu"`,
		"vc \"a\" {\n  cells {\n    type = \"node8\"\n    count = 2\n  }\n  pin = [\"rack0-n0\"]\n}",
		"vc \"a\" {\n  cells {\n    type = \"pair2\"\n    count = 1048577\n  }\n}",
		"vc \"a\" {}\nvc \"b\" {\n  pin = [\"rack0-n1/socket0\", \"rack0-n1-g7\"]\n}",
		`vc "a" { cells { type = 1 count = "x" } }`,
		"vc \"a\" {\n  cells {\n    type = \"node8\"\n    count = -1\n  }\n}",
		`vc "${x}" {}`,
		"vc \"a\" {\n  pin = [\"\"]\n}",
		"vc \"a\" {\n  namespace \"team-a\" {\n    max_priority = 10\n    classes = [\"be\"]\n    opportunistic = false\n    trust_progress = true\n  }\n  namespace \"*\" {}\n}",
		"namespace \"team-a\" {\n  classes = []\n}\nnamespace \"b\" {}",
		"vc \"a\" {\n  namespace \"x\" {\n    max_priority = -2\n  }\n}",
	} {
		f.Add([]byte(s))
	}
	cl, err := cluster.FromPresetOrFile("n2g8")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := ParseConfig("fuzz.hcl", src)
		if err != nil {
			if cfg != nil {
				t.Fatal("config with error")
			}
			return
		}
		// A parsed config renders and parses back to itself ...
		back, err := ParseConfig("back.hcl", FormatConfig(cfg))
		if err != nil {
			t.Fatalf("formatted config does not parse: %v\n%s", err, FormatConfig(cfg))
		}
		if !reflect.DeepEqual(strip(back), strip(cfg)) {
			t.Fatalf("round trip: %+v, want %+v", strip(back), strip(cfg))
		}
		// ... its bindings answer any claim without panicking ...
		for _, ns := range []string{"team-a", "*", ""} {
			_ = cfg.Admit(ns, "a", 0, "te")
			_ = cfg.TrustsProgress(ns, "a")
		}
		// ... and New takes it or says why, without panicking.
		if c, err := New(cl.Nodes, cfg); err == nil {
			if err := check(c); err != nil {
				t.Fatal(err)
			}
		}
	})
}
