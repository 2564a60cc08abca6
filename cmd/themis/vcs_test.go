package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/hived"
)

// `themis vcs --show` prints who may use each virtual cluster: one row per
// binding, an unbound VC closed (fail closed, issue #45), and a config without vc
// blocks as the one default virtual cluster.
func TestVCsShowBindings(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "vcs", "two-policies.hcl")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src string
		rows      [][]string
	}{
		{"two-policies.hcl", string(src), [][]string{
			{"trial", "1 x node8", "fitgpp", "team-trial", "1000", "any", "yes", "no"},
			{"research", "1 x node8", "tiresias-las", "team-research", "100", "be", "yes", "no"},
		}},
		{"unbound", "vc \"a\" {\n  cells {\n    type = \"node8\"\n    count = 2\n  }\n}\n", [][]string{
			{"a", "2 x node8", "the stack's", `none: closed (no namespace block; namespace "*" {} opens it)`, "-", "-", "-", "-"},
		}},
		{"without VCs", "namespace \"team-a\" {\n  trust_progress = true\n  classes = [\"be\"]\n  opportunistic = false\n}\n", [][]string{
			{"(default)", "the whole cluster", "the stack's", "team-a", "1000", "be", "no", "yes"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := hived.ParseConfig(tc.name, []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			showBindings(&out, cfg)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != len(tc.rows)+1 || !strings.HasPrefix(lines[0], "VC ") {
				t.Fatalf("output:\n%s", out.String())
			}
			for i, want := range tc.rows {
				var got []string
				for _, f := range strings.Split(lines[i+1], "  ") {
					if f = strings.TrimSpace(f); f != "" {
						got = append(got, f)
					}
				}
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("row %d: %q, want %q", i, got, want)
				}
			}
		})
	}
}
