package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

type statusCommand struct{ ui cli.Ui }

func (c *statusCommand) Synopsis() string {
	return "Show what the planner decided about each themis job"
}

func (c *statusCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis status [-consul-addr ADDR]

  Lists every themis job the planner knows with its state (queued, granted,
  rejected, finished), the node and GPUs of its lease, and why it waits or was
  rejected. It reads the planner's records in Consul KV (themis/status/).
`)
}

func (c *statusCommand) Run(args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	addr := fs.String("consul-addr", "", "Consul HTTP address (default $CONSUL_HTTP_ADDR or 127.0.0.1:8500)")
	if err := fs.Parse(args); err != nil {
		return 2
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sts, err := consul.NewStore(cc).Statuses(ctx)
	if err != nil {
		c.ui.Error("themis status: " + err.Error())
		return 1
	}
	progress, err := consul.NewStore(cc).Progress(ctx)
	if err != nil {
		c.ui.Error("themis status: " + err.Error())
		return 1
	}
	sort.Slice(sts, func(i, j int) bool { return sts[i].Since.Before(sts[j].Since) })
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tSTATE\tSINCE\tNODE\tGPUS\tPREEMPTED\tPROGRESS\tREASON")
	for _, st := range sts {
		reason := st.Reason
		if !st.Deadline.IsZero() {
			reason += "; checkpointing until " + st.Deadline.Local().Format(time.TimeOnly)
		}
		if st.Driver != "" {
			reason = strings.TrimPrefix(reason+"; driver "+st.Driver+": no lease check at start", "; ")
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", st.Namespace, st.JobID, st.State,
			st.Since.Local().Format(time.TimeOnly), dash(st.Node), dash(strings.Join(st.GPUs, ",")), st.Preemptions,
			dash(showProgress(progress[core.JobKey{Namespace: st.Namespace, ID: st.JobID}])), dash(reason))
	}
	w.Flush()
	return 0
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// showProgress is a job's progress report in a few characters:
// "1200/5000 it, 12.5 it/s, loss 0.53", "" when it reports none.
func showProgress(p lease.ProgressRecord) string {
	if p.At.IsZero() {
		return ""
	}
	out := strconv.FormatInt(p.Iteration, 10)
	if p.Total > 0 {
		out += "/" + strconv.FormatInt(p.Total, 10)
	}
	out += " it"
	if p.Rate > 0 {
		out += fmt.Sprintf(", %.3g it/s", p.Rate)
	}
	if p.Loss != nil {
		out += fmt.Sprintf(", loss %.3g", *p.Loss)
	}
	return out
}
