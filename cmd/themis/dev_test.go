package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A `themis dev` interrupted while its agents start (Ctrl-C before Consul
// leads) stops what it started and ends quietly: the interruption is no
// error.
func TestDevInterruptedWhileStartingIsQuiet(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	// An agent that never becomes ready.
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"themis-device", "themis-driver"} {
		if err := os.WriteFile(filepath.Join(plugins, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := devstack.Config{NomadBin: agent, ConsulBin: agent, PluginDir: plugins, Templates: "../../examples/agents",
		Topology: "../../examples/topology/dev-node.hcl", NodeName: "dev-node", DataDir: filepath.Join(dir, "data")}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := startDevAgent(ctx, cfg)
	if err == nil {
		t.Fatal("the dev agent started with agents that never get ready")
	}
	if !stoppedStarting(ctx, err) {
		t.Fatalf("interrupted start-up: %v; want it taken as a quiet stop", err)
	}
	if stoppedStarting(context.Background(), err) {
		t.Error("an error without an interruption is taken as a quiet stop")
	}
}

// The banner, printed once the planner leads, says so and gives the
// dashboard's address with the others.
func TestDevBannerNamesTheDashboard(t *testing.T) {
	dev := &devAgents{nomadAddr: "http://127.0.0.1:4646", consulAddr: "127.0.0.1:8500"}
	b := devBanner(4100*time.Millisecond, dev, "/tmp/themis-dev-1", "127.0.0.1:4680")
	for _, want := range []string{
		"==> themis dev stack is up, the planner leads (4.1s)",
		"Dashboard:  http://127.0.0.1:4680/ui/",
		"Nomad UI:   http://127.0.0.1:4646/ui",
		"Themis API: http://127.0.0.1:4680/v1/queue",
		"export NOMAD_ADDR=http://127.0.0.1:4646 CONSUL_HTTP_ADDR=127.0.0.1:8500",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("the banner lacks %q:\n%s", want, b)
		}
	}
}
