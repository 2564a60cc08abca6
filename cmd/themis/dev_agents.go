package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/e2e/devstack"
)

// devClusterTopology is -topology's default with -clients.
const devClusterTopology = "examples/topology/dev-cluster.hcl"

// devAgents are the agents `themis dev` runs.
type devAgents struct {
	what                  string // for "Stopping ..."
	nomadAddr, consulAddr string
	// nodes is printed after the addresses: the cluster's clients.
	nodes string
	stop  func()
	// tokens are the ACL tokens (-acl); zero otherwise.
	tokens devstack.Tokens
	// dockerHost is the stack's Docker daemon ("" without one).
	dockerHost string
}

// startDevAgent starts Consul and one Nomad dev agent (server + client).
func startDevAgent(ctx context.Context, cfg devstack.Config) (*devAgents, error) {
	stack, err := devstack.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &devAgents{what: "Nomad and Consul", nomadAddr: stack.NomadAddr(), consulAddr: stack.ConsulAddr(), stop: stack.Stop,
		tokens: stack.Tokens(), dockerHost: stack.DockerHost()}, nil
}

// startDevCluster starts Consul, a Nomad server and o.clients Nomad
// clients, the first nodes of the topology file.
func startDevCluster(ctx context.Context, cfg devstack.Config, o devOptions) (*devAgents, error) {
	if o.set["node"] {
		return nil, fmt.Errorf("-node names the dev agent's node; with -clients %d the clients are the first %d nodes of -topology", o.clients, o.clients)
	}
	if !o.set["topology"] {
		cfg.Topology = devClusterTopology
	}
	topo, err := topology.Load(cfg.Topology)
	if err != nil {
		return nil, err
	}
	if len(topo.Nodes) < o.clients {
		return nil, fmt.Errorf("-clients %d: topology file %s has %d nodes (%s); add node blocks or ask for fewer clients",
			o.clients, cfg.Topology, len(topo.Nodes), strings.Join(topo.NodeNames(), ", "))
	}
	var lines []string
	for _, n := range topo.Nodes[:o.clients] {
		cfg.Nodes = append(cfg.Nodes, n.Name)
		lines = append(lines, fmt.Sprintf("%s (%s, %d GPUs)", n.Name, n.Rack, len(n.GPUs)))
	}
	cfg.NodeName = ""
	// The clients' HTTP ports follow the server's three.
	cfg.Ports.NomadClientHTTP = cfg.Ports.NomadHTTP + 3
	consul, err := devstack.StartConsul(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// -acl: the cluster's agents use Consul's tokens.
	cfg.ACLTokens = consul.Tokens()
	cluster, err := devstack.StartCluster(ctx, cfg)
	if err != nil {
		consul.Stop()
		return nil, err
	}
	return &devAgents{
		what:      "the clients' tasks, Nomad and Consul",
		nomadAddr: cluster.NomadAddr(), consulAddr: consul.ConsulAddr(),
		nodes: fmt.Sprintf("    Clients:    %s\n                (%s; client HTTP ports %d-%d)\n",
			strings.Join(lines, ", "), cfg.Topology, cfg.Ports.NomadClientHTTP, cfg.Ports.NomadClientHTTP+o.clients-1),
		stop: func() {
			cluster.Close()
			consul.Stop()
		},
		tokens: cluster.Tokens(),
	}, nil
}
