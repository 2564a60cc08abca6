package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/check"
)

type checkCommand struct{ ui cli.Ui }

func (c *checkCommand) Synopsis() string {
	return "Watch Nomad and Consul for violations of themis's invariants"
}

func (c *checkCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis check [options]

  Reads Consul KV (themis/leases/, themis/status/, themis/jobs/) and Nomad's
  jobs and allocations, on its own (not through the planner), and reports
  every violation of the invariants in docs/invariants.md: a GPU leased to
  two jobs, a themis task on a GPU it holds no lease for, a gang partly
  running, a preempted task killed before its grace period ended, a themis
  job neither queued, running nor finished.

  It watches until interrupted, printing each violation once, as it
  appears; with -once it checks once and exits 1 if it found any (2 if it
  could not read Nomad or Consul).

Options:
` + flagHelp(checkFlags(&checkOptions{})))
}

type checkOptions struct {
	nomadAddr, consulAddr, pendingPool string
	once, json                         bool
	interval                           time.Duration
	tol                                check.Tolerances
}

func checkFlags(o *checkOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.StringVar(&o.nomadAddr, "nomad-addr", "", "Nomad HTTP address (default $NOMAD_ADDR or http://127.0.0.1:4646)")
	fs.StringVar(&o.consulAddr, "consul-addr", "", "Consul HTTP address (default $CONSUL_HTTP_ADDR or 127.0.0.1:8500)")
	fs.StringVar(&o.pendingPool, "pending-pool", check.DefaultPendingPool, "node pool in which themis jobs wait for a grant")
	fs.BoolVar(&o.once, "once", false, "check once; exit 1 if there is any violation")
	fs.BoolVar(&o.json, "json", false, "print each violation as a JSON object on a line")
	fs.DurationVar(&o.interval, "interval", time.Second, "how often to read Nomad and Consul")
	fs.DurationVar(&o.tol.Gang, "gang-tolerance", check.DefaultTolerances.Gang, "how long a multi-node gang may run partly")
	fs.DurationVar(&o.tol.Grace, "grace-tolerance", check.DefaultTolerances.Grace, "a preempted task killed less than this before its deadline is not reported")
	fs.DurationVar(&o.tol.Lost, "lost-tolerance", check.DefaultTolerances.Lost, "how long a themis job may be neither queued, running nor finished")
	return fs
}

func (c *checkCommand) Run(args []string) int {
	var o checkOptions
	fs := checkFlags(&o)
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ncfg := nomadapi.DefaultConfig()
	if o.nomadAddr != "" {
		ncfg.Address = o.nomadAddr
	}
	nc, err := nomadapi.NewClient(ncfg)
	if err != nil {
		c.ui.Error("themis check: nomad client: " + err.Error())
		return 1
	}
	ccfg := consulapi.DefaultConfig()
	if o.consulAddr != "" {
		ccfg.Address = o.consulAddr
	}
	cc, err := consulapi.NewClient(ccfg)
	if err != nil {
		c.ui.Error("themis check: consul client: " + err.Error())
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &check.Reader{Nomad: nc, Consul: cc, PendingPool: o.pendingPool}
	print := printer(os.Stdout, o.json)
	if o.once {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		s, err := r.Snapshot(ctx)
		if err != nil {
			c.ui.Error("themis check: " + safe(err.Error()))
			return 2
		}
		unreadable := 0
		for _, j := range s.Jobs {
			if j.Unreadable != "" {
				unreadable++
				c.ui.Warn("themis check: " + safe(j.Unreadable) + " (taken for a themis job: its allocations' GPUs are checked)")
			}
		}
		vs := check.Check(s, o.tol)
		for _, v := range vs {
			print(v)
		}
		if len(vs) > 0 {
			return 1
		}
		if !o.json {
			fmt.Fprintf(os.Stdout, "ok: %d job leases, %d GPU leases, %d jobs (%d unreadable), %d allocations; no violation\n",
				len(s.JobLeases), len(s.GPULeases), len(s.Jobs), unreadable, len(s.Allocs))
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "themis check: watching Nomad %s and Consul %s every %s; violations go to stdout\n", ncfg.Address, ccfg.Address, o.interval)
	w := &check.Watcher{Reader: r, Interval: o.interval, Tolerances: o.tol, Report: print,
		Error: func(err error) { c.ui.Error("themis check: " + safe(err.Error())) }}
	if err := w.Run(ctx); err != nil {
		c.ui.Error("themis check: " + safe(err.Error()))
		return 1
	}
	return 0
}

func printer(w io.Writer, asJSON bool) func(check.Violation) {
	enc := json.NewEncoder(w)
	return func(v check.Violation) {
		if asJSON {
			_ = enc.Encode(v)
			return
		}
		fmt.Fprintf(w, "%s VIOLATION %s\n", time.Now().UTC().Format(time.RFC3339), safe(v.String()))
	}
}
