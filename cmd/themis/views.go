package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/themis-nomad/themis/planner/lease"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/httpapi"
)

// themis queue: each virtual cluster's waiting jobs in rank order.
type queueCommand struct{ viewCommand }

func (c *queueCommand) Synopsis() string {
	return "Show each virtual cluster's queue: position and why each job waits"
}

func (c *queueCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis queue [-vc NAME] [options]

  Lists the jobs waiting in each virtual cluster's queue (one queue without
  virtual clusters), in the order the policy ranks them: position, GPUs
  asked, state (queued; waiting: granted GPUs another job still holds; or
  suspended: preempted, waiting to resume) and why
  each waits. It reads the leading planner's API (GET /v1/queue). Where no
  planner serves it, it lists Consul's status records of the waiting jobs
  instead, by the time they entered their state: they know no positions
  and no virtual clusters.

Options:

  -vc NAME           one virtual cluster's queue` + viewOptionsHelp)
}

func (c *queueCommand) Run(args []string) int {
	var o viewOptions
	var vc string
	rest, ok := c.parse("queue", args, &o, func(fs *flagSet) { fs.StringVar(&vc, "vc", "", "one virtual cluster's queue") })
	if !ok || !noArgs(c.ui, "queue", rest) {
		return 2
	}
	return c.run("queue", func(ctx context.Context) error {
		var q httpapi.QueueResponse
		path := "/v1/queue"
		if vc != "" {
			path += "?vc=" + url.QueryEscape(vc)
		}
		served, err := c.get(ctx, o, path, &q)
		if !served {
			if !isNotServed(err) {
				return err
			}
			store, ferr := c.fallback("queue", o, err, ", which know no queue positions or virtual clusters")
			if ferr != nil {
				return ferr
			}
			sts, err := store.Statuses(ctx)
			if _, err = consul.Unreadable(err); err != nil {
				return err
			}
			q = queueFromStatuses(sts)
		}
		return c.emit(o, q, func(w io.Writer) { printQueue(w, q, o.verbose) })
	})
}

// themis leases: the leases in Consul after the planner's last round.
type leasesCommand struct{ viewCommand }

func (c *leasesCommand) Synopsis() string {
	return "Show the GPU leases: job, node, GPUs, when granted, when they end"
}

func (c *leasesCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis leases [options]

  Lists every lease: the job holding it, its state (granted, or revoking:
  the job checkpoints and stops, by the deadline), the node and GPUs,
  its virtual cluster, when it was granted and, for a lease for a time
  (Themis), when it ends. It reads the leading planner's API (GET
  /v1/leases), or where no planner serves it, the lease keys in Consul
  (themis/leases/jobs/), which hold the same.

Options:
` + viewOptionsHelp)
}

func (c *leasesCommand) Run(args []string) int {
	var o viewOptions
	rest, ok := c.parse("leases", args, &o, nil)
	if !ok || !noArgs(c.ui, "leases", rest) {
		return 2
	}
	return c.run("leases", func(ctx context.Context) error {
		var ls httpapi.LeasesResponse
		served, err := c.get(ctx, o, "/v1/leases", &ls)
		if !served {
			if !isNotServed(err) {
				return err
			}
			store, ferr := c.fallback("leases", o, err, "")
			if ferr != nil {
				return ferr
			}
			if ls, err = leasesFromConsul(ctx, store, c.ui.Warn); err != nil {
				return err
			}
		}
		return c.emit(o, ls, func(w io.Writer) { printLeases(w, ls, o.verbose) })
	})
}

// leasesFromConsul is /v1/leases from the lease keys.
func leasesFromConsul(ctx context.Context, store *consul.Store, warn func(string)) (httpapi.LeasesResponse, error) {
	m, err := store.Leases(ctx)
	bad, err := consul.Unreadable(err)
	for _, b := range bad {
		warn("left out " + safe(b.String()))
	}
	out := httpapi.LeasesResponse{Leases: []httpapi.Lease{}}
	if err != nil {
		return out, err
	}
	for _, l := range m {
		x := httpapi.Lease{Job: l.Namespace + "/" + l.JobID, State: httpapi.LeaseGranted, JobLease: l}
		if l.Revoke != nil {
			x.State = httpapi.LeaseRevoking
		}
		out.Leases = append(out.Leases, x)
	}
	slices.SortFunc(out.Leases, func(a, b httpapi.Lease) int { return strings.Compare(a.Job, b.Job) })
	return out, nil
}

// printLeases writes one line per lease: its GPUs counted and a long
// reason cut, or with verbose every GPU id and the whole reason.
func printLeases(out io.Writer, ls httpapi.LeasesResponse, verbose bool) {
	var b strings.Builder
	defer func() { writeTable(out, b.String(), verbose) }()
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tSTATE\tNODE\tGPUS\tVC\tGRANTED\tENDS\tDEADLINE\tREASON")
	for _, l := range ls.Leases {
		nodes := make([]string, 0, 1)
		for _, p := range l.Nodes() {
			nodes = append(nodes, p.NodeName)
		}
		deadline, reason := "-", "-"
		if l.Revoke != nil {
			deadline, reason = clock(l.Revoke.Deadline), l.Revoke.Reason
		}
		gpus := strconv.Itoa(len(l.GPUs))
		if verbose {
			gpus = dash(safe(strings.Join(l.GPUs, ",")))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(l.Job), l.State, dash(safe(strings.Join(nodes, ","))), gpus,
			dash(safe(l.VC)), clock(l.GrantedAt), clock(l.Ends), deadline, safe(reason))
	}
	w.Flush()
}

// themis apps: the last auction round per app (Themis).
type appsCommand struct{ viewCommand }

func (c *appsCommand) Synopsis() string {
	return "Show the last auction round per app (Themis): rho, bid, GPUs won, lease end"
}

func (c *appsCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis apps [-app NAME] [options]

  Under the themis policy, shows the last auction round per app: its
  finish-time fairness rho if it won nothing, whether it bid, the GPUs it
  won, its rho with them, where they are (machine, rack, cluster) and when
  its lease ends. It reads the leading planner's API (GET /v1/apps), or
  where no planner serves it, the round the planner recorded in Consul
  (themis/auction/last).

Options:

  -app NAME          one app` + viewOptionsHelp)
}

func (c *appsCommand) Run(args []string) int {
	var o viewOptions
	var app string
	rest, ok := c.parse("apps", args, &o, func(fs *flagSet) { fs.StringVar(&app, "app", "", "one app") })
	if !ok || !noArgs(c.ui, "apps", rest) {
		return 2
	}
	return c.run("apps", func(ctx context.Context) error {
		var a httpapi.AppsResponse
		path := "/v1/apps"
		if app != "" {
			path += "?app=" + url.QueryEscape(app)
		}
		served, err := c.get(ctx, o, path, &a)
		if !served {
			if !isNotServed(err) {
				return err
			}
			store, ferr := c.fallback("apps", o, err, "")
			if ferr != nil {
				return ferr
			}
			if a, err = appsFromConsul(ctx, store, app); err != nil {
				return err
			}
		}
		return c.emit(o, a, func(w io.Writer) { printApps(w, a) })
	})
}

// appsFromConsul is /v1/apps from the recorded auction round.
func appsFromConsul(ctx context.Context, store *consul.Store, app string) (httpapi.AppsResponse, error) {
	out := httpapi.AppsResponse{Apps: []httpapi.App{}}
	b, err := store.Auction(ctx)
	if err != nil || b == nil {
		return out, err
	}
	var rep arbiter.RoundReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return out, fmt.Errorf("%s: %w", lease.AuctionKey, err)
	}
	out = httpapi.AppsFromRound("", &rep)
	if app != "" {
		out.Apps = slices.DeleteFunc(out.Apps, func(a httpapi.App) bool { return !httpapi.AppIs(a.App, app) })
	}
	return out, nil
}

func printApps(out io.Writer, a httpapi.AppsResponse) {
	if a.Round == 0 {
		fmt.Fprintln(out, "no auction round yet (the planner runs another policy than themis, or it has not auctioned since it started leading)")
		return
	}
	at, _ := time.Parse(time.RFC3339, a.At)
	fmt.Fprintf(out, "auction round %d at %s, %d GPUs offered\n", a.Round, clock(at), a.OfferGPUs)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "APP\tRHO\tBID\tWON\tRHO WITH IT\tPLACED\tLEASE ENDS")
	for _, x := range a.Apps {
		bid, after, ends := "no", "-", "-"
		if x.Bid {
			bid = "yes"
		}
		if x.Won > 0 {
			after = fmt.Sprintf("%.3f", x.RhoAfter)
		}
		if t, err := time.Parse(time.RFC3339, x.LeaseEnds); err == nil {
			ends = clock(t)
		}
		fmt.Fprintf(w, "%s\t%.3f\t%s\t%d\t%s\t%s\t%s\n", safe(x.App), x.Rho, bid, x.Won, after, dash(safe(x.Placed)), ends)
	}
	w.Flush()
}
