package hived

import (
	"strings"
	"testing"
)

// With a VC config, a VC no namespace block binds is closed, and so is a
// config without vc blocks that binds no namespace: every claim on it is
// refused, naming the rule and how to open it (namespace "*"); a
// namespace "*" block opens it to every namespace.
func TestUnboundIsClosed(t *testing.T) {
	cases := []struct {
		name, src, ns, vc string
		want              []string // nil = admitted
	}{
		{"a VC without namespace blocks", "vc \"open\" {\n  cells {\n    type  = \"node8\"\n    count = 1\n  }\n}\n", "anyone", "open",
			[]string{`themis.vc: namespace "anyone" may not use virtual cluster "open"`, `binds no namespace to it`, `namespace "*" {}`, "c.hcl:1,1"}},
		{"a VC opened with namespace \"*\"", "vc \"open\" {\n  namespace \"*\" {}\n}\n", "anyone", "open", nil},
		{"a config without VCs or bindings", "\n", "anyone", "default",
			[]string{`namespace: namespace "anyone" may not use this cluster`, `binds no namespace to it`, `namespace "*" {}`}},
		{"a config without VCs, opened", "namespace \"*\" {}\n", "anyone", "default", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig("c.hcl", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Admit(tc.ns, tc.vc, 1000, "te")
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted: an unbound VC is open to every namespace at priority 1000")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not name %q", err, w)
				}
			}
		})
	}
}
