package main

import (
	"context"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/e2e/devstack"
)

// -clients is checked against the topology file, and -node refused with it,
// before any agent starts.
func TestDevClusterRefusesBadFlags(t *testing.T) {
	cfg := devstack.Config{Topology: "../../examples/topology/dev-cluster.hcl", DataDir: t.TempDir()}
	for _, tc := range []struct {
		o    devOptions
		want string
	}{
		{devOptions{clients: 4, set: map[string]bool{"topology": true}},
			"-clients 4: topology file ../../examples/topology/dev-cluster.hcl has 3 nodes (node-0, node-1, node-2)"},
		{devOptions{clients: 2, set: map[string]bool{"topology": true, "node": true}},
			"-node names the dev agent's node"},
	} {
		_, err := startDevCluster(context.Background(), cfg, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("clients %d, flags %v: error %v, want one containing %q", tc.o.clients, tc.o.set, err, tc.want)
		}
	}
}
