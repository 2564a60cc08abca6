package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

type devCommand struct{ ui cli.Ui }

func (c *devCommand) Synopsis() string {
	return "Run a local stack: Consul, Nomad with the themis plugins, the planner"
}

func (c *devCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis dev [options]

  Starts a Consul dev agent, a Nomad dev agent (server + client) with the
  themis device plugin (a simulated 8-GPU node) and task driver, and the
  planner, then waits. Ctrl-C stops all of them. ` + "`make dev`" + ` builds
  everything and runs this with the right paths.

  With -clients N it starts a multi-node cluster instead: one Nomad server
  and N Nomad clients on this machine (agents that keep their state in the
  data folder, not -dev), client i being the i-th node of the -topology
  file (default examples/topology/dev-cluster.hcl: node-0 and node-1 in
  rack0, node-2 in rack1, 8 GPUs each), with its own data dir, HTTP port
  and cgroup parent; all share one checkpoint folder. The server listens on
  -nomad-port (RPC and Serf on the next two), the clients' HTTP on the
  ports after those. On Ctrl-C the clients' nodes are drained first (each
  task gets its checkpoint signal and grace period, up to a minute), then
  every agent stops.

    make dev ARGS="-clients 3"

  With -acl Consul and Nomad run with ACLs on (Consul default_policy
  deny), the dev agent or, with -clients N, the server and every client;
  the stack bootstraps both with a management token, loads the
  least-privilege policies of examples/acl (planner, driver, read-only
  operator) with a token each, runs the planner with the planner's tokens
  and every client's themis driver with its Consul token, and prints the
  management and operator tokens (docs/acl.md).

    make dev ARGS="-acl"
    make dev ARGS="-acl -clients 3"

Options:
` + flagHelp(devFlags(&devOptions{})))
}

type devOptions struct {
	nomadBin, consulBin, pluginDir, templates, topology, node, dataDir, logLevel, policy, vcConfig, docker string
	knobs                                                                                                  stringList
	consulPort, nomadPort, clients                                                                         int
	keep, agentLogs, acl                                                                                   bool
	// set are the flags given on the command line.
	set map[string]bool
}

func devFlags(o *devOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.StringVar(&o.nomadBin, "nomad", "nomad", "path of the nomad binary (make dev passes the one it built)")
	fs.StringVar(&o.consulBin, "consul", "consul", "path of the consul binary")
	fs.StringVar(&o.pluginDir, "plugin-dir", "build/plugins", "folder with themis-device and themis-driver")
	fs.StringVar(&o.templates, "templates", "examples/agents", "folder with the agent config templates")
	fs.StringVar(&o.topology, "topology", "examples/topology/dev-node.hcl", "simulated GPU topology (with -clients: default "+devClusterTopology+")")
	fs.StringVar(&o.node, "node", "dev-node", "node of the topology file that the dev agent's client is (not with -clients)")
	fs.IntVar(&o.clients, "clients", 0, "N > 0: a Nomad server and N Nomad clients, the first N nodes of -topology, instead of one dev agent")
	fs.StringVar(&o.dataDir, "data-dir", "", "folder for configs, logs and checkpoints (default: a temporary folder, removed at exit)")
	fs.IntVar(&o.consulPort, "consul-port", 8500, "Consul HTTP port (other Consul ports: 8300-8302)")
	fs.IntVar(&o.nomadPort, "nomad-port", 4646, "Nomad HTTP port (RPC and Serf use the next two)")
	fs.BoolVar(&o.keep, "keep", false, "keep the data folder at exit")
	fs.BoolVar(&o.acl, "acl", false, "ACLs on in Nomad and Consul, with the policies and tokens of examples/acl (docs/acl.md); with -clients N, on the server and every client")
	fs.BoolVar(&o.agentLogs, "agent-logs", false, "also print the agents' logs (they always go to the data folder)")
	fs.StringVar(&o.logLevel, "log-level", "info", "planner log level")
	fs.StringVar(&o.policy, "policy", "fitgpp", "the planner's queue policy: "+strings.Join(stack.LiveNames(), ", "))
	fs.Var(&o.knobs, "set", "policy knob key=value (repeatable), as `themis planner -set`")
	fs.StringVar(&o.vcConfig, "vc-config", "", "virtual clusters (HCL), as `themis planner -vc-config`")
	fs.StringVar(&o.docker, "docker", "auto", "a Docker daemon of the stack's own for Nomad's docker driver (not with -clients): auto (where dockerd is installed and this runs as root), on, off")
	return fs
}

func (c *devCommand) Run(args []string) int {
	var o devOptions
	fs := devFlags(&o)
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.run(ctx, o); err != nil {
		c.ui.Error("themis dev: " + err.Error())
		return 1
	}
	return 0
}

func (c *devCommand) run(ctx context.Context, o devOptions) error {
	log := hclog.New(&hclog.LoggerOptions{Name: "themis", Level: hclog.LevelFromString(o.logLevel)})
	if o.dataDir == "" {
		d, err := os.MkdirTemp("", "themis-dev-")
		if err != nil {
			return err
		}
		o.dataDir = d
		if !o.keep {
			defer os.RemoveAll(d)
		}
	}
	cfg := devstack.Config{
		NomadBin: o.nomadBin, ConsulBin: o.consulBin, PluginDir: o.pluginDir, Templates: o.templates,
		Topology: o.topology, NodeName: o.node, DataDir: o.dataDir, Log: log.Named("dev"),
		Ports: devstack.Ports{
			ConsulHTTP: o.consulPort, ConsulServer: 8300, ConsulSerfLAN: 8301, ConsulSerfWAN: 8302,
			NomadHTTP: o.nomadPort, NomadRPC: o.nomadPort + 1, NomadSerf: o.nomadPort + 2,
		},
	}
	if o.agentLogs {
		cfg.AgentLogs = os.Stderr
	}
	if o.acl {
		cfg.ACL = true
		cfg.ACLPolicyDir = filepath.Join(filepath.Dir(filepath.Clean(o.templates)), "acl")
	}
	switch o.docker {
	case "off":
	case "auto", "on":
		if o.clients > 0 {
			if o.docker == "on" {
				return fmt.Errorf("-docker on: only the single dev agent runs a Docker daemon, not -clients %d", o.clients)
			}
			break
		}
		path, why := devstack.DockerdPath()
		if path == "" && o.docker == "on" {
			return fmt.Errorf("-docker on: %s", why)
		}
		cfg.Dockerd = path
	default:
		return fmt.Errorf("-docker %q: want auto, on or off", o.docker)
	}
	start := time.Now()
	var dev *devAgents
	var err error
	if o.clients > 0 {
		dev, err = startDevCluster(ctx, cfg, o)
	} else if o.clients < 0 {
		err = fmt.Errorf("-clients %d: give a number of clients, or 0 for one dev agent", o.clients)
	} else {
		dev, err = startDevAgent(ctx, cfg)
	}
	if stoppedStarting(ctx, err) {
		c.ui.Output("==> Stopped while starting")
		return nil
	}
	if err != nil {
		return err
	}
	defer func() {
		c.ui.Output("==> Stopping " + dev.what)
		dev.stop()
		c.ui.Output("==> Stopped")
	}()
	c.ui.Output("==> Agents up (" + fmt.Sprintf("%.1fs", time.Since(start).Seconds()) + "); starting the planner")
	return runPlanner(ctx, plannerOptions{
		// The banner once the planner leads and serves its first round:
		// its addresses all answer then.
		onLead:    func() { c.ui.Output(devBanner(time.Since(start), dev, o.dataDir, httpapi.DefaultAddr)) },
		nomadAddr: dev.nomadAddr, consulAddr: dev.consulAddr, policy: o.policy, knobs: o.knobs, vcConfig: o.vcConfig,
		pendingPool: nomad.DefaultPendingPool, resync: 30 * time.Second, logLevel: o.logLevel, id: "themis-dev",
		pinWorkers: planner.ConcurrentPinWorkers,
		httpAddr:   httpapi.DefaultAddr,
		// examples/agents/nomad-dev.hcl.tmpl and nomad-client.hcl.tmpl raise
		// client.max_kill_timeout to 30m.
		maxKillTimeout: 30 * time.Minute, restoreGuard: 10 * time.Second,
		// raw_exec themis jobs checkpoint under a root their users can
		// write to, which the dev stack makes (devstack.RawExecCheckpoints).
		checkpointRoot: devstack.RawExecCheckpoints(o.dataDir),
		// -acl: the planner's tokens (examples/acl/planner.*.hcl).
		nomadToken: dev.tokens.PlannerNomad, consulToken: dev.tokens.PlannerConsul,
	}, log.Named("planner"))
}

// devBanner is what themis dev prints once its planner leads: the UIs,
// the dashboard, the API and what to type next.
func devBanner(up time.Duration, dev *devAgents, dataDir, apiAddr string) string {
	return fmt.Sprintf(`==> themis dev stack is up, the planner leads (%.1fs)

    Dashboard:  http://%[6]s/ui/  (the planner's: queue, GPUs, decisions)
    Nomad UI:   %[2]s/ui
    Consul UI:  http://%[3]s/ui  (leases: Key/Value > themis/leases)
    Themis API: http://%[6]s/v1/queue  (docs/api.md; metrics at /metrics)
    Data:       %[4]s (agent logs, rendered configs, checkpoints)
%[5]s
  In another shell:

    export NOMAD_ADDR=%[2]s CONSUL_HTTP_ADDR=%[3]s%[7]s%[8]s
    themis job run examples/jobs/hello.nomad.hcl   # queued, granted, running
    themis queue; themis nodes; themis job explain hello
    nomad job run -detach examples/jobs/hello.nomad.hcl   # the plain Nomad way

  Ctrl-C stops everything.
`, up.Seconds(), dev.nomadAddr, dev.consulAddr, dataDir, dev.nodes, apiAddr, aclLines(dev.tokens), dockerLine(dev.dockerHost))
}

// stoppedStarting: the start-up failed only because it was interrupted
// (Ctrl-C while the agents start); what had started is stopped already,
// and that is no error.
func stoppedStarting(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled)
}

// dockerLine is the DOCKER_HOST export of the stack's banner when it runs
// a Docker daemon.
func dockerLine(host string) string {
	if host == "" {
		return ""
	}
	return "\n    export DOCKER_HOST=" + host + "   # the stack's dockerd (examples/docker/build.sh builds images there)"
}

// aclLines are the token exports of the stack's banner with -acl: the
// management token (to submit jobs) and, commented, the read-only
// operator's (themis status, themis check, the UIs).
func aclLines(t devstack.Tokens) string {
	if t.Management == "" {
		return ""
	}
	return fmt.Sprintf(`
    # ACLs are on (docs/acl.md). Management token, for themis job run and nomad job run:
    export NOMAD_TOKEN=%[1]s CONSUL_HTTP_TOKEN=%[1]s
    # Read-only operator (themis status, themis check, the UIs'
    # "Sign in"): examples/acl/operator.*.hcl
    #   export NOMAD_TOKEN=%[2]s CONSUL_HTTP_TOKEN=%[3]s`, t.Management, t.OperatorNomad, t.OperatorConsul)
}
