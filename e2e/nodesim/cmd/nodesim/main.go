// Command nodesim runs simulated Nomad client nodes with themis GPUs
// (package e2e/nodesim) against a Nomad server until interrupted:
//
//	nodesim -server 127.0.0.1:4647 -nodes 1000 -per-rack 40
//	nodesim -server 127.0.0.1:4647 -topology cluster.hcl
//
// It prints "ready <n>" once every node registered, then its counters
// every -report interval.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/e2e/nodesim"
)

func main() {
	server := flag.String("server", "127.0.0.1:4647", "the Nomad server's RPC address")
	nodes := flag.Int("nodes", 10, "simulated 8-GPU nodes (nodesim.Cluster), when -topology is not set")
	perRack := flag.Int("per-rack", 40, "nodes to a rack, with -nodes")
	topo := flag.String("topology", "", "a topology file whose nodes to simulate")
	def := flag.Duration("default-duration", 0, "how long a task runs when its job does not say (0: until stopped)")
	report := flag.Duration("report", time.Minute, "how often to print the counters")
	flag.Parse()
	log := hclog.New(&hclog.LoggerOptions{Name: "nodesim", Level: hclog.Warn})
	t := nodesim.Cluster(*nodes, *perRack)
	if *topo != "" {
		var err error
		if t, err = topology.Load(*topo); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	sim, err := nodesim.Start(ctx, nodesim.Config{Server: *server, Topology: t, DefaultDuration: *def, Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer sim.Close()
	fmt.Printf("ready %d in %s\n", sim.Stats().Nodes, time.Since(began).Round(time.Millisecond))
	tick := time.NewTicker(*report)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fmt.Printf("%+v\n", sim.Stats())
		}
	}
}
