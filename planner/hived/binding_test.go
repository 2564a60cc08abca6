package hived

import (
	"reflect"
	"strings"
	"testing"
)

const boundSrc = `
vc "trial" {
  cells {
    type  = "node8"
    count = 1
  }
  namespace "team-trial" {
    classes = ["te", "be"]
  }
}
vc "research" {
  cells {
    type  = "node8"
    count = 1
  }
  namespace "team-research" {
    max_priority   = 100
    classes        = ["be"]
    opportunistic  = false
    trust_progress = true
  }
  namespace "*" {
    max_priority = -1
  }
}
vc "open" {}
`

// The bindings parse with their defaults and positions, and FormatConfig
// writes them back.
func TestParseBindings(t *testing.T) {
	cfg, err := ParseConfig("b.hcl", []byte(boundSrc))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]Binding{
		{{Namespace: "team-trial", MaxPriority: 1000, Classes: []string{"te", "be"}, Opportunistic: true, pos: "b.hcl:7,3"}},
		{{Namespace: "team-research", MaxPriority: 100, Classes: []string{"be"}, TrustProgress: true, pos: "b.hcl:16,3"},
			{Namespace: "*", MaxPriority: -1, Opportunistic: true, pos: "b.hcl:22,3"}},
		nil,
	}
	for i, v := range cfg.VCs {
		if !reflect.DeepEqual(v.Namespaces, want[i]) {
			t.Errorf("vc %q binds %+v, want %+v", v.Name, v.Namespaces, want[i])
		}
	}
	back, err := ParseConfig("back.hcl", FormatConfig(cfg))
	if err != nil {
		t.Fatalf("%v\n%s", err, FormatConfig(cfg))
	}
	for i := range back.VCs {
		for j := range back.VCs[i].Namespaces {
			back.VCs[i].Namespaces[j].pos = want[i][j].pos
		}
		if !reflect.DeepEqual(back.VCs[i].Namespaces, want[i]) {
			t.Errorf("read back, vc %q binds %+v\n%s", back.VCs[i].Name, back.VCs[i].Namespaces, FormatConfig(cfg))
		}
	}
}

// A job's claim on a virtual cluster, priority and class is checked
// against its namespace's binding; a refusal names the field, the
// namespace and the rule, and where the rule is written.
func TestAdmit(t *testing.T) {
	cfg, err := ParseConfig("b.hcl", []byte(boundSrc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, ns, vc string
		prio         int
		class        string
		want         []string // "" = admitted
	}{
		{"its own VC", "team-trial", "trial", 1000, "te", nil},
		{"another team's VC (the ACL-mode attack)", "team-research", "trial", 1000, "te",
			[]string{`themis.vc: namespace "team-research" may not use virtual cluster "trial"`, `namespace "team-trial" only`, "b.hcl:7,3"}},
		{"above the ceiling", "team-research", "research", 101, "be",
			[]string{`themis.priority: 101`, `namespace "team-research"`, `max_priority = 100`, "b.hcl:16,3"}},
		{"at the ceiling", "team-research", "research", 100, "be", nil},
		{"a class not allowed", "team-research", "research", 0, "te",
			[]string{`themis.class: namespace "team-research" may not submit class "te" to virtual cluster "research"`, `classes = ["be"]`}},
		{"opportunistic not allowed", "team-research", "research", -1, "be",
			[]string{`themis.priority: -1 (opportunistic): namespace "team-research" may not run opportunistic jobs`, "opportunistic = false"}},
		{"any other namespace: opportunistic only", "team-trial", "research", -1, "be", nil},
		{"any other namespace, guaranteed", "team-x", "research", 0, "be",
			[]string{`themis.priority: 0 is above`, `namespace "team-x"`, `max_priority = -1`, "b.hcl:22,3"}},
		{"an unbound VC is closed", "anyone", "open", 1000, "te",
			[]string{`themis.vc: namespace "anyone" may not use virtual cluster "open": the VC config binds no namespace to it`, "b.hcl:26,1"}},
		{"an unknown VC, opportunistic too", "team-trial", "nope", -1, "be",
			[]string{`themis.vc: virtual cluster "nope" is not configured (configured: trial, research, open)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := cfg.Admit(tc.ns, tc.vc, tc.prio, tc.class)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not name %q", err, w)
				}
			}
		})
	}
	if !cfg.TrustsProgress("team-research", "research") || cfg.TrustsProgress("team-trial", "trial") || cfg.TrustsProgress("team-x", "research") {
		t.Error("trust_progress: want team-research's in research only")
	}
	var none *Config
	if err := none.Admit("x", "y", 1000, "te"); err != nil || none.TrustsProgress("x", "y") {
		t.Errorf("without a VC config: %v, trusted %v; want every claim admitted, no progress trusted", err, none.TrustsProgress("x", "y"))
	}
}

// A config without vc blocks binds the one default virtual cluster with
// top-level namespace blocks; the job's vc is not looked at.
func TestAdmitWithoutVCs(t *testing.T) {
	cfg, err := ParseConfig("t.hcl", []byte(`
namespace "team-a" {
  trust_progress = true
}
namespace "team-b" {
  max_priority = 10
}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Admit("team-a", "whatever", 1000, "te"); err != nil {
		t.Errorf("team-a refused: %v", err)
	}
	if err := cfg.Admit("team-b", "default", 11, "be"); err == nil || !strings.Contains(err.Error(), `themis.priority: 11 is above the highest priority namespace "team-b" may use in this cluster`) {
		t.Errorf("team-b at 11: %v", err)
	}
	if err := cfg.Admit("team-c", "default", 0, "be"); err == nil || !strings.Contains(err.Error(), `namespace: namespace "team-c" may not use this cluster`) {
		t.Errorf("team-c: %v", err)
	}
	if !cfg.TrustsProgress("team-a", "any") || cfg.TrustsProgress("team-b", "any") {
		t.Error("trust_progress: want team-a's only")
	}
}

func TestBindingErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"vc \"a\" {\n  namespace \"x\" {\n    max_priority = 1001\n  }\n}", `x.hcl:3,20-24: Invalid max_priority; vc "a": namespace "x": max_priority 1001 must be from -1`},
		{"vc \"a\" {\n  namespace \"x\" {\n    classes = [\"fast\"]\n  }\n}", `Invalid class; vc "a": namespace "x": classes: "fast" is not a class`},
		{"vc \"a\" {\n  namespace \"x\" {}\n  namespace \"x\" {}\n}", `x.hcl:3,13-16: Duplicate namespace; vc "a": namespace "x" is already bound at x.hcl:2,3`},
		{"vc \"a\" {\n  namespace \"x y\" {}\n}", `Invalid namespace; vc "a": namespace name: "x y" must not contain ' '`},
		{"vc \"a\" {\n  namespace \"x\" {\n    trust_progress = \"yes please\"\n  }\n}", `Unsuitable value type`},
		{"vc \"a\" {\n  namespace \"x\" {\n    owner = 1\n  }\n}", `An argument named "owner" is not expected here`},
		{"namespace \"x\" {}\nvc \"a\" {}", `x.hcl:1,1-14: Misplaced namespace; namespace blocks at the top level bind a config without virtual clusters`},
	} {
		_, err := ParseConfig("x.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.src, err, tc.want)
		}
	}
	// Configs built in code are checked the same way.
	cfg := &Config{VCs: []VCConfig{{Name: "a", Namespaces: []Binding{{Namespace: "x", MaxPriority: 2000}}}}}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), `vc "a": namespace "x": max_priority 2000`) {
		t.Errorf("validate: %v", err)
	}
}
