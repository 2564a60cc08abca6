package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/aclhint"
	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
)

type statusCommand struct{ ui cli.Ui }

func (c *statusCommand) Synopsis() string {
	return "Show what the planner decided about each themis job"
}

func (c *statusCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis status [-queue | -apps] [-verbose | -json] [-addr URL] [-consul-addr ADDR]

  Lists every themis job the planner knows with its state (queued,
  waiting: granted GPUs another job still holds, suspended, granted,
  revoking, rejected, unreadable, purged, or how it ended: finished,
  failed, lost; "(held)" where the planner holds it in Nomad), the node and GPUs of its lease, and why it waits,
  was rejected or failed (Nomad's reason). It reads the planner's records in
  Consul KV (themis/status/). themis queue, nodes, leases, apps, vcs and job
  explain show the planner's API's views.

  With -queue it lists the waiting jobs of each virtual cluster in the order
  the policy ranks them, with their position and why each waits, from the
  leading planner's HTTP API (-addr; a standby's answer is followed to the
  leader). Where no planner serves the API it falls back to Consul's
  records, which know no positions: the jobs are listed by the time they
  entered their state.

  With -apps (policy themis) it shows the last auction round per app: its
  finish-time fairness rho, whether it bid, the GPUs it won, its rho with
  them and how long it holds them (themis/auction/last).

  The table names a job's GPUs in short, as ranges of their indices
  (SIM-node-0-[0-7]) or as a count (8 GPUs); -verbose lists every GPU id,
  and -json prints the records as JSON, GPU ids and all.

Options:

  -queue             show the queues
  -apps              show the last auction round per app
  -verbose           list every GPU id of each job
  -json              print the status records (with each job's progress
                     report) as JSON
  -addr URL          the planner's HTTP API (default $THEMIS_ADDR or
                     http://127.0.0.1:4680)
  -consul-addr ADDR  Consul HTTP address (default $CONSUL_HTTP_ADDR or
                     127.0.0.1:8500)
`)
}

func (c *statusCommand) Run(args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	addr := fs.String("consul-addr", "", "Consul HTTP address (default $CONSUL_HTTP_ADDR or 127.0.0.1:8500)")
	apiAddr := fs.String("addr", cmp.Or(os.Getenv("THEMIS_ADDR"), "http://"+httpapi.DefaultAddr), "the planner's HTTP API")
	queue := fs.Bool("queue", false, "show each virtual cluster's queue: position and reason")
	apps := fs.Bool("apps", false, "show the last auction round per app (policy themis)")
	verbose := fs.Bool("verbose", false, "list every GPU id of each job")
	asJSON := fs.Bool("json", false, "print the status records as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if *queue {
		q, err := (&httpapi.Client{Addr: *apiAddr}).Queue(ctx)
		if err == nil {
			printQueue(os.Stdout, q, *verbose)
			return 0
		}
		if !errors.Is(err, httpapi.ErrNotServed) {
			c.ui.Error("themis status: " + safe(operatorHint(err).Error()))
			return 1
		}
		c.ui.Warn(safe(fmt.Sprintf("themis status: no planner API at %s (%v); reading Consul's records, which know no queue positions", *apiAddr, err)))
	}
	cfg := consulapi.DefaultConfig()
	if *addr != "" {
		cfg.Address = *addr
	}
	cc, err := consulapi.NewClient(cfg)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	if *apps {
		b, err := consul.NewStore(cc).Auction(ctx)
		if err != nil {
			c.ui.Error("themis status: " + operatorHint(err).Error())
			return 1
		}
		if b == nil {
			c.ui.Output("no auction round recorded (the planner runs another policy than themis, or no round ran yet)")
			return 0
		}
		var rep arbiter.RoundReport
		if err := json.Unmarshal(b, &rep); err != nil {
			c.ui.Error(fmt.Sprintf("themis status: %s: %v", lease.AuctionKey, err))
			return 1
		}
		printAuction(os.Stdout, rep)
		return 0
	}
	sts, err := consul.NewStore(cc).Statuses(ctx)
	if err = c.warnUnreadable(err); err != nil {
		c.ui.Error("themis status: " + safe(operatorHint(err).Error()))
		return 1
	}
	if *queue {
		printQueue(os.Stdout, queueFromStatuses(sts), *verbose)
		return 0
	}
	progress, err := consul.NewStore(cc).Progress(ctx)
	if err = c.warnUnreadable(err); err != nil {
		c.ui.Error("themis status: " + safe(operatorHint(err).Error()))
		return 1
	}
	if *asJSON {
		if err := printStatusJSON(os.Stdout, sts, progress); err != nil {
			c.ui.Error("themis status: " + err.Error())
			return 1
		}
		return 0
	}
	printStatuses(os.Stdout, sts, progress, *verbose)
	return 0
}

// statusJSON is one job in themis status -json: its status record and its
// last progress report.
type statusJSON struct {
	lease.JobStatus
	Progress *lease.ProgressRecord `json:"progress,omitempty"`
}

// printStatusJSON writes the records as themis status -json does: a JSON
// array, oldest change first, every GPU id in full, the states as the
// views name them (httpapi.ShownState).
func printStatusJSON(out io.Writer, sts []lease.JobStatus, progress map[core.JobKey]lease.ProgressRecord) error {
	sort.Slice(sts, func(i, j int) bool { return sts[i].Since.Before(sts[j].Since) })
	docs := make([]statusJSON, 0, len(sts))
	for _, st := range sts {
		d := statusJSON{JobStatus: st}
		d.State = httpapi.ShownState(st.State, st.Reason)
		if p, ok := progress[st.Key()]; ok {
			d.Progress = &p
		}
		docs = append(docs, d)
	}
	b, err := json.MarshalIndent(docs, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// warnUnreadable warns about each record of a listing that cannot be used
// (the others are shown) and returns err when the listing failed whole.
func (c *statusCommand) warnUnreadable(err error) error {
	bad, err := consul.Unreadable(err)
	for _, b := range bad {
		c.ui.Warn("themis status: left out " + safe(b.String()))
	}
	return err
}

// printStatuses writes one line per job status, oldest change first, the
// GPUs in short unless verbose. It and the other views print what users
// control through safe.
func printStatuses(out io.Writer, sts []lease.JobStatus, progress map[core.JobKey]lease.ProgressRecord, verbose bool) {
	sort.Slice(sts, func(i, j int) bool { return sts[i].Since.Before(sts[j].Since) })
	var b strings.Builder
	defer func() { writeTable(out, b.String(), verbose) }()
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tSTATE\tSINCE\tNODE\tGPUS\tPREEMPTED\tPROGRESS\tREASON")
	for _, st := range sts {
		reason := st.Reason
		if !st.Deadline.IsZero() {
			reason += "; checkpointing until " + st.Deadline.Local().Format(time.TimeOnly)
		}
		if st.Driver != "" {
			reason = strings.TrimPrefix(reason+"; driver "+st.Driver+": no lease check at start", "; ")
		}
		state := httpapi.ShownState(st.State, st.Reason)
		if st.Held != "" {
			state += " (held)" // count 0 in Nomad, its version tagged themis-held
		}
		gpus := shortGPUs(st.GPUs)
		if verbose {
			gpus = strings.Join(st.GPUs, ",")
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", safe(st.Namespace), safe(st.JobID), safe(state),
			st.Since.Local().Format(time.TimeOnly), dash(safe(st.Node)), dash(safe(gpus)), st.Preemptions,
			dash(showProgress(progress[core.JobKey{Namespace: st.Namespace, ID: st.JobID}], !verbose)), dash(safe(reason)))
	}
	w.Flush()
}

// printQueue writes the queues, one line per waiting job, long reasons cut
// unless verbose.
func printQueue(out io.Writer, q httpapi.QueueResponse, verbose bool) {
	var b strings.Builder
	defer func() { writeTable(out, b.String(), verbose) }()
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VC\tPOS\tJOB\tGPUS\tSTATE\tREASON")
	for _, vc := range q.VCs {
		for _, j := range vc.Jobs {
			pos, gpus := "-", "-"
			if j.Position > 0 {
				pos = strconv.Itoa(j.Position)
			}
			if j.GPUs > 0 {
				gpus = strconv.Itoa(j.GPUs)
			}
			state := j.State
			if j.Held != "" {
				state += " (held)"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", dash(safe(vc.VC)), pos, safe(j.Job), gpus, safe(state), dash(safe(j.Reason)))
		}
	}
	w.Flush()
}

// queueFromStatuses is the fallback queue from Consul's status records:
// the queued and suspended jobs by the time they entered that state, with
// no VC or position (the records do not keep them).
func queueFromStatuses(sts []lease.JobStatus) httpapi.QueueResponse {
	sort.SliceStable(sts, func(i, j int) bool { return sts[i].Since.Before(sts[j].Since) })
	vc := httpapi.VCQueue{Jobs: []httpapi.Queued{}}
	for _, st := range sts {
		if st.State == "queued" || st.State == "suspended" {
			vc.Jobs = append(vc.Jobs, httpapi.Queued{Job: st.Namespace + "/" + st.JobID, Namespace: st.Namespace, JobID: st.JobID,
				State: httpapi.ShownState(st.State, st.Reason), Reason: st.Reason, Held: st.Held})
		}
	}
	return httpapi.QueueResponse{VCs: []httpapi.VCQueue{vc}}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// showProgress is a job's progress report in a few characters:
// "1200/5000 it, 12.5 it/s, loss 0.53", "" when it reports none; short,
// the iterations are a share of the total where it is known ("24%, 12.5
// it/s, loss 0.53"), for the table's width.
func showProgress(p lease.ProgressRecord, short bool) string {
	if p.At.IsZero() {
		return ""
	}
	out := strconv.FormatInt(p.Iteration, 10)
	switch {
	case short && p.Total > 0:
		out = strconv.FormatFloat(100*float64(p.Iteration)/float64(p.Total), 'g', 3, 64) + "%"
	case p.Total > 0:
		out += "/" + strconv.FormatInt(p.Total, 10) + " it"
	default:
		out += " it"
	}
	if p.Rate > 0 {
		out += fmt.Sprintf(", %.3g it/s", p.Rate)
	}
	if p.Loss != nil {
		out += fmt.Sprintf(", loss %.3g", *p.Loss)
	}
	return out
}

// printAuction shows one auction round per app.
func printAuction(out io.Writer, rep arbiter.RoundReport) {
	fmt.Fprintf(out, "auction round %d at %s, %d GPUs offered\n", rep.Round, rep.At.Local().Format(time.TimeOnly), rep.Offer)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "APP\tRHO\tBID\tWON\tRHO WITH IT\tPLACED\tHOLDS UNTIL")
	for _, a := range rep.Apps {
		bid, after, until := "no", "-", "-"
		if a.Bid {
			bid = "yes"
		}
		if a.Won > 0 {
			after = fmt.Sprintf("%.3f", a.RhoAfter)
			until = rep.At.Add(time.Duration(a.Lease * float64(time.Second))).Local().Format(time.TimeOnly)
		}
		fmt.Fprintf(w, "%s\t%.3f\t%s\t%d\t%s\t%s\t%s\n", safe(a.App), a.Rho, bid, a.Won, after, dash(safe(a.Placed)), until)
	}
	w.Flush()
}

// operatorHint gives an ACL refusal of status's Consul reads the read-only
// operator's policy (examples/acl/operator.consul.hcl; docs/acl.md).
func operatorHint(err error) error {
	var e *aclhint.Error
	if errors.As(err, &e) {
		err = e.Err
	}
	return aclhint.Wrap(err, "Consul", "themis status's read of themis/", `key_prefix "themis/" { policy = "read" }`, "operator.consul.hcl")
}
