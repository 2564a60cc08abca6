package devstack

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/nomad/acl"
)

// TestExamplePoliciesGrantNoReadFS: no Nomad policy of examples/acl lets
// its holder read an allocation's files (read-fs, which `policy = "write"`
// and "scale" include) or run commands in one (alloc-exec,
// alloc-node-exec). Nomad's `alloc fs` resolves a path's symlinks as root
// and then opens it (client/allocdir, PathEscapesAllocDir then os.Open):
// a task that swaps a dir of its own for a symlink between the two has
// root read any file of the client for whoever holds read-fs
// (docs/hardening.md, "ACL rules for users"). Before: user.nomad.hcl
// granted read-fs.
func TestExamplePoliciesGrantNoReadFS(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "acl", "*.nomad.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no policies in examples/acl: %v", err)
	}
	banned := []string{acl.NamespaceCapabilityReadFS, acl.NamespaceCapabilityAllocExec, acl.NamespaceCapabilityAllocNodeExec}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := acl.Parse(string(b), true)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, ns := range p.Namespaces {
			for _, c := range banned {
				if slices.Contains(ns.Capabilities, c) {
					t.Errorf("%s: namespace %q grants %s", filepath.Base(f), ns.Name, c)
				}
			}
		}
	}
}
