package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/aclhint"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

type plannerCommand struct{ ui cli.Ui }

func (c *plannerCommand) Synopsis() string { return "Run the themis planner daemon" }

func (c *plannerCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis planner [options]

  Runs the planner: it watches Nomad for jobs with a themis task, decides which
  of them get GPUs, writes GPU leases to Consul KV and pins granted jobs to
  their node and GPUs. Several planners may run; one leads (Consul lock
  themis/planner/leader) and the others stand by. Each registers a Consul
  service themis-planner-<id> with a 3 s heartbeat check that its lock is
  bound to, so a standby takes over about 3 s after a leader dies.

  The leading planner serves a read-only JSON API and Prometheus metrics on
  -http-addr (default 127.0.0.1:4680; docs/api.md); a standby answers 503
  naming the leader.

  Nomad and Consul are found through the usual NOMAD_ADDR / NOMAD_TOKEN and
  CONSUL_HTTP_ADDR / CONSUL_HTTP_TOKEN variables, or the flags below. With
  ACLs on, the tokens need the policies of examples/acl/planner.*.hcl
  (docs/acl.md); the planner checks them at start and exits naming what a
  token lacks.

Options:
` + flagHelp(plannerFlags(&plannerOptions{})))
}

type plannerOptions struct {
	nomadAddr, consulAddr, policy, pendingPool, logLevel, id, vcConfig string
	checkpointRoot                                                     string
	// nomadToken and consulToken, when set, replace $NOMAD_TOKEN and
	// $CONSUL_HTTP_TOKEN (`themis dev -acl`).
	nomadToken, consulToken              string
	httpAddr, httpAdvertise              string
	httpACL                              bool
	resync, maxKillTimeout, restoreGuard time.Duration
	stopOnClientAfter                    time.Duration
	knobs                                stringList
	decideEveryRound                     bool
	pinWorkers                           int
	// onLead, when set, is called once: after the planner first leads
	// and has published its first round (themis dev's banner).
	onLead func()
}

func plannerFlags(o *plannerOptions) *flag.FlagSet {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("planner", flag.ContinueOnError)
	fs.StringVar(&o.nomadAddr, "nomad-addr", "", "Nomad HTTP address (default $NOMAD_ADDR or http://127.0.0.1:4646)")
	fs.StringVar(&o.consulAddr, "consul-addr", "", "Consul HTTP address (default $CONSUL_HTTP_ADDR or 127.0.0.1:8500)")
	fs.StringVar(&o.policy, "policy", "fifo", "queue policy: "+strings.Join(stack.LiveNames(), ", "))
	fs.Var(&o.knobs, "set", "policy knob key=value, as in `themis sim --set` (repeatable), e.g. fitgpp.max_preemptions=2")
	fs.StringVar(&o.vcConfig, "vc-config", "", "virtual clusters (HCL, as `themis sim --vc-config`): HiveD cells per VC, and optionally its own policy and knobs; SIGHUP reloads the file")
	fs.DurationVar(&o.maxKillTimeout, "max-kill-timeout", 30*time.Second,
		"the Nomad clients' client.max_kill_timeout: jobs asking for a longer grace_period are rejected (Nomad would cut it)")
	fs.DurationVar(&o.stopOnClientAfter, "stop-on-client-after", nomad.DefaultStopOnClientAfter,
		"the disconnect.stop_on_client_after pins set: a Nomad client cut off from its servers this long stops its themis tasks itself; a job whose allocation was lost with its node is re-queued at the latest this plus -max-kill-timeout plus 10 s after (docs/design.md, \"A lost allocation is not a dead one\")")
	fs.DurationVar(&o.restoreGuard, "restore-guard", 10*time.Second,
		"a job resumed after a preemption runs this long before it may be preempted again")
	fs.StringVar(&o.pendingPool, "pending-pool", nomad.DefaultPendingPool, "node pool in which themis jobs wait for a grant")
	def := nomad.DefaultForeignCheckpoints()
	fs.StringVar(&o.checkpointRoot, "checkpoint-root", def.Root,
		"host directory of the checkpoint dirs of raw_exec themis tasks, which their users make (not the themis driver's checkpoint_root; docs/drivers.md)")
	fs.DurationVar(&o.resync, "resync", 30*time.Second, "reconcile period, on top of Nomad events (a round where nothing changed ends after reading four indexes)")
	fs.BoolVar(&o.decideEveryRound, "decide-every-round", false,
		"read everything and decide in every round, even when nothing changed since the last (by default such rounds are skipped: docs/scale.md)")
	fs.IntVar(&o.pinWorkers, "pin-workers", planner.ConcurrentPinWorkers,
		"how many of a round's grants pin their jobs in Nomad at once (1: one after another; docs/scale.md, \"A burst of grants\" and \"The scale run\")")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.StringVar(&o.httpAddr, "http-addr", httpapi.DefaultAddr,
		"address of the planner's HTTP API (JSON under /v1/, dashboard at /ui/, Prometheus metrics at /metrics; docs/api.md); empty: none")
	fs.BoolVar(&o.httpACL, "http-acl", true,
		"callers of the HTTP API name a Nomad ACL token (X-Nomad-Token) and see only the namespaces it can read; /metrics needs a management token (docs/api.md, \"Access\"); where Nomad's ACLs are off, everyone sees everything")
	fs.StringVar(&o.httpAdvertise, "http-advertise", "",
		"the API's URL as other planners and clients reach it, recorded in the leader lock (default http://<-http-addr>)")
	fs.StringVar(&o.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this planner's identity in the leader lock")
	return fs
}

func (c *plannerCommand) Run(args []string) int {
	var o plannerOptions
	fs := plannerFlags(&o)
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "themis.planner", Level: hclog.LevelFromString(o.logLevel)})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runPlanner(ctx, o, log); err != nil {
		c.ui.Error("themis planner: " + err.Error())
		return 1
	}
	return 0
}

// policyByName builds the live planner's stack for a -policy value and its
// -set knobs, through the same registry as `themis sim` (planner/stack),
// and refuses what the live planner cannot carry out.
func policyByName(name string, settings []string, vcConfig string) (*stack.Stack, error) {
	knobs, err := core.ParseKnobs(settings)
	if err != nil {
		return nil, fmt.Errorf("-set: %w", err)
	}
	var vcs *hived.Config
	if vcConfig != "" {
		src, err := os.ReadFile(vcConfig)
		if err != nil {
			return nil, fmt.Errorf("-vc-config: %w", err)
		}
		if vcs, err = hived.ParseConfig(vcConfig, src); err != nil {
			return nil, fmt.Errorf("-vc-config: %w", err)
		}
	}
	st, err := stack.Build(name, stack.Options{Knobs: knobs, VCs: vcs})
	if err != nil {
		return nil, fmt.Errorf("-policy %s: %w", name, err)
	}
	if err := knobs.Unused(); err != nil {
		return nil, fmt.Errorf("-set: %w", err)
	}
	if err := st.Live(); err != nil {
		return nil, fmt.Errorf("-policy %s: %w", name, err)
	}
	return st, nil
}

func runPlanner(ctx context.Context, o plannerOptions, log hclog.Logger) error {
	policy, err := policyByName(o.policy, o.knobs, o.vcConfig)
	if err != nil {
		return err
	}
	if o.pinWorkers < 0 {
		return fmt.Errorf("-pin-workers %d: want 0 or more (0 and 1 pin one job at a time)", o.pinWorkers)
	}
	ncfg := nomadapi.DefaultConfig()
	if o.nomadAddr != "" {
		ncfg.Address = o.nomadAddr
	}
	if o.nomadToken != "" {
		ncfg.SecretID = o.nomadToken
	}
	nc, err := nomadapi.NewClient(ncfg)
	if err != nil {
		return fmt.Errorf("nomad client: %w", err)
	}
	ccfg := consulapi.DefaultConfig()
	if o.consulAddr != "" {
		ccfg.Address = o.consulAddr
	}
	if o.consulToken != "" {
		ccfg.Token = o.consulToken
	}
	cc, err := consulapi.NewClient(ccfg)
	if err != nil {
		return fmt.Errorf("consul client: %w", err)
	}
	store := consul.NewStore(cc)
	warnUntestedVersions(nc, cc, log)
	if err := checkACL(ctx, ncfg, nc, ccfg, store, o.pendingPool, log); err != nil {
		return err
	}
	api, apiURL, err := startAPI(ctx, o, ncfg, store, log)
	if err != nil {
		return err
	}
	var leadOnce sync.Once
	announce := func() {
		if o.onLead != nil {
			leadOnce.Do(o.onLead)
		}
	}
	for ctx.Err() == nil {
		log.Info("waiting for planner leadership", "lock", lease.LeaderKey, "id", o.id)
		lctx, release, err := store.LeadAs(ctx, consul.LeaderInfo{ID: o.id, API: apiURL}, log.Named("leader"))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if aclhint.Denied(err) {
				return err
			}
			log.Error("cannot take the leader lock; retrying", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(2 * time.Second):
			}
			continue
		}
		log.Info("leading", "nomad", ncfg.Address, "consul", ccfg.Address, "policy", policy.Policy.Name(), "victims", policy.Victims)
		ncl := nomad.NewClient(nc, o.pendingPool, log.Named("nomad"))
		ncl.SetForeignCheckpoints(nomad.ForeignCheckpoints{Root: o.checkpointRoot})
		ncl.SetStopOnClientAfter(o.stopOnClientAfter)
		cfg := planner.Config{
			Nomad: ncl, Store: store,
			Stack: policy, Resync: o.resync, Log: log,
			MaxKillTimeout: o.maxKillTimeout, RestoreGuard: o.restoreGuard, StopOnClientAfter: o.stopOnClientAfter,
			DecideEveryRound: o.decideEveryRound, PinWorkers: o.pinWorkers,
		}
		if api != nil {
			cfg.OnRound = func(v planner.View) {
				api.Publish(v)
				announce() // the API serves a round: the views answer
			}
			api.SetLeading(true)
		} else {
			announce()
		}
		p := planner.New(cfg)
		stopReload := reloadOnHUP(lctx, o, p, log)
		err = p.Run(lctx)
		stopReload()
		if api != nil {
			api.SetLeading(false)
		}
		release()
		if err != nil {
			return err
		}
		if ctx.Err() == nil {
			log.Warn("lost planner leadership; standing by")
		}
	}
	return nil
}

func flagHelp(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(&b, "  -%s\n      %s", f.Name, f.Usage)
		if f.DefValue != "" {
			fmt.Fprintf(&b, " (default %q)", f.DefValue)
		}
		b.WriteString("\n\n")
	})
	return b.String()
}

// reloadOnHUP rebuilds the planner's stack from -vc-config (and the other
// flags) on SIGHUP, until the returned stop is called. A config that does
// not parse, or that the stack refuses, is logged and the old one stays.
func reloadOnHUP(ctx context.Context, o plannerOptions, p *planner.Planner, log hclog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-hup:
				st, err := policyByName(o.policy, o.knobs, o.vcConfig)
				if err != nil {
					log.Error("SIGHUP: keeping the current configuration", "error", err)
					continue
				}
				p.SetStack(st)
				log.Info("SIGHUP: reloaded; applies from the next round", "vc_config", o.vcConfig)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// checkACL, when the planner has a Nomad or Consul token (ACLs are on),
// checks before it runs that the token allows what the planner does, so
// that a token without the policies of examples/acl is refused at once with
// the call and the capability (docs/acl.md) rather than failing every
// round. Without tokens nothing is checked. A check that fails for another
// reason (an agent not up yet) is only logged: the planner retries.
func checkACL(ctx context.Context, ncfg *nomadapi.Config, nc *nomadapi.Client, ccfg *consulapi.Config, store *consul.Store, pool string, log hclog.Logger) error {
	if ccfg.Token != "" {
		if err := store.CheckACL(ctx); aclhint.Denied(err) {
			return err
		} else if err != nil {
			log.Warn("cannot check the Consul token's permissions", "error", err)
		}
	}
	if ncfg.SecretID != "" {
		if err := nomad.NewClient(nc, pool, log).CheckACL(ctx); aclhint.Denied(err) {
			return err
		} else if err != nil {
			log.Warn("cannot check the Nomad token's permissions", "error", err)
		}
	}
	return nil
}
