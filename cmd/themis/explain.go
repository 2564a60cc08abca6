package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/nomad"
)

// themis job explain: why a job waits, was preempted or runs where it does.
type explainCommand struct{ viewCommand }

func (c *explainCommand) Synopsis() string {
	return "Explain a job: why it waits or was preempted, what is ahead of it, what would let it run"
}

func (c *explainCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis job explain [options] JOB

  Explains what the planner decided about a themis job (JOB is its ID, or
  NAMESPACE/ID): its state and why; for a waiting job its place in its
  virtual cluster's queue, the jobs ahead of it, the other jobs' leases it
  waits on (those holding GPUs it could use, or for a waiting job the one
  it was granted GPUs of) with when each ends, and what would let it run
  (fewer GPUs where that many are free now, another virtual cluster with
  room, when the leases holding GPUs end); for a preempted job when and
  why, and its grace period; for a running job its node, GPUs and lease;
  for a rejected or failed one the reason. It reads the leading planner's
  API (GET /v1/jobs/<ns>/<id>, /v1/queue, /v1/nodes, /v1/leases). Where no
  planner serves it, it shows the job's status record in Consul.

Options:

  -namespace NS      the job's namespace when JOB has none (default
                     $NOMAD_NAMESPACE or "default")` + viewOptionsHelp)
}

// explanation is job explain's document.
type explanation struct {
	Job    string    `json:"job"`
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Held is how the planner holds it in Nomad (its tag's description).
	Held    string           `json:"held,omitempty"`
	Request *httpapi.Request `json:"request,omitempty"`
	// VC and Position are its queue and place in it (waiting jobs); Ahead
	// the jobs before it there.
	VC       string           `json:"vc,omitempty"`
	Position int              `json:"position,omitempty"`
	Ahead    []httpapi.Queued `json:"ahead,omitempty"`
	// BlockedBy are the other jobs' leases it waits on (explain_blockers.go).
	BlockedBy []blocker `json:"blocked_by,omitempty"`
	// Lease is the lease it holds (running or being preempted).
	Lease *httpapi.Lease `json:"lease,omitempty"`
	// Preemptions counts its preemptions; Preempted are the recent ones
	// the planner logged, with their reasons.
	Preemptions int                `json:"preemptions"`
	Preempted   []httpapi.Decision `json:"preempted,omitempty"`
	// Options are what would let a waiting job run, each a sentence.
	Options []string `json:"options,omitempty"`
	// Source says where this came from: "api", or "consul" (the status
	// record alone).
	Source string `json:"source"`
	// policy and now are for the table: the policy that preempts, the
	// time the leases' remaining times count from.
	policy string
	now    time.Time
}

func (c *explainCommand) Run(args []string) int {
	var o viewOptions
	ns := cmp.Or(os.Getenv("NOMAD_NAMESPACE"), "default")
	rest, ok := c.parse("job explain", args, &o, func(fs *flagSet) { fs.StringVar(&ns, "namespace", ns, "the job's namespace") })
	if !ok {
		return 2
	}
	if len(rest) != 1 {
		c.ui.Error("themis job explain: give one job (ID or NAMESPACE/ID)\n\n" + c.Help())
		return 2
	}
	key := core.JobKey{Namespace: ns, ID: rest[0]}
	if n, id, ok := strings.Cut(rest[0], "/"); ok && n != "" && id != "" {
		key = core.JobKey{Namespace: n, ID: id}
	}
	return c.run("job explain", func(ctx context.Context) error {
		x, err := c.explain(ctx, o, key)
		if err != nil {
			return err
		}
		return c.emit(o, x, func(w io.Writer) { printExplanation(w, x) })
	})
}

func (c *explainCommand) explain(ctx context.Context, o viewOptions, key core.JobKey) (explanation, error) {
	var job httpapi.Job
	served, err := c.get(ctx, o, "/v1/jobs/"+url.PathEscape(key.Namespace)+"/"+url.PathEscape(key.ID), &job)
	if !served {
		if !isNotServed(err) {
			return explanation{}, err
		}
		store, ferr := c.fallback("job explain", o, err, ": the job's status alone, without its place in the queue or what would let it run")
		if ferr != nil {
			return explanation{}, ferr
		}
		return explainFromConsul(ctx, store, key)
	}
	var q httpapi.QueueResponse
	var nodes httpapi.NodesResponse
	var ls httpapi.LeasesResponse
	for path, out := range map[string]any{"/v1/queue": &q, "/v1/nodes": &nodes, "/v1/leases": &ls} {
		if _, err := c.get(ctx, o, path, out); err != nil {
			return explanation{}, err
		}
	}
	return explain(job, q, nodes, ls, time.Now()), nil
}

// explain puts together what the API says of a job.
func explain(job httpapi.Job, q httpapi.QueueResponse, nodes httpapi.NodesResponse, ls httpapi.LeasesResponse, now time.Time) explanation {
	x := explanation{Job: job.Job, State: job.State, Reason: job.Reason, Since: job.Since, Held: job.Held, Request: job.Request, Lease: job.Lease,
		Preemptions: job.Record.Preemptions, Source: "api", policy: nodes.Policy, now: now}
	for _, d := range job.Decisions {
		if d.Kind == "preempt" {
			x.Preempted = append(x.Preempted, d)
		}
	}
	if job.Queue == nil || job.Request == nil {
		return x
	}
	x.Position = job.Queue.Position
	for _, vc := range q.VCs {
		if !slices.ContainsFunc(vc.Jobs, func(j httpapi.Queued) bool { return j.Job == job.Job }) {
			continue
		}
		x.VC = vc.VC
		for _, j := range vc.Jobs {
			if j.Position < job.Queue.Position {
				x.Ahead = append(x.Ahead, j)
			}
		}
	}
	x.BlockedBy = blockers(job, nodes, ls)
	x.Options = options(job, x, nodes, ls, now)
	return x
}

// options are what would let a waiting job run, from the free GPUs, the
// virtual clusters and the leases.
func options(job httpapi.Job, x explanation, nodes httpapi.NodesResponse, ls httpapi.LeasesResponse, now time.Time) []string {
	want := job.Request.GPUs
	var out []string
	r := roomFor(job, nodes)
	bestNode, bestFree, total, nodeSize := r.bestNode, r.bestFree, r.total, r.nodeSize
	vcFree, inVC := -1, false
	for _, vc := range nodes.VCs {
		if vc.Name == job.Request.VC {
			vcFree, inVC = vc.Free, true
			if vc.Free < want && job.Request.Priority >= 0 {
				if vc.Free > 0 {
					out = append(out, fmt.Sprintf("fewer GPUs: virtual cluster %s has %s free in its cells (%d of %d in use); asking for %d (themis.gpus = %d) would fit them",
						vc.Name, plural(vc.Free, "GPU"), vc.Used, vc.GPUs, vc.Free, vc.Free))
				} else {
					out = append(out, fmt.Sprintf("virtual cluster %s's cells are all in use (%d of %d GPUs)", vc.Name, vc.Used, vc.GPUs))
				}
				if bestFree >= want && want <= nodeSize {
					out = append(out, fmt.Sprintf("as an opportunistic job (themis.priority = -1, if its namespace may run them) it could use the %s free on %s now, until their virtual cluster needs them", plural(bestFree, "GPU"), bestNode))
				}
			}
		}
	}
	switch {
	case inVC && vcFree < want && job.Request.Priority >= 0:
	case want <= nodeSize && bestFree >= want:
		out = append(out, fmt.Sprintf("%s free on %s now: it waits for its turn, not for room", plural(bestFree, "GPU"), bestNode)+aheadNote(x.Ahead))
	case want <= nodeSize && bestFree > 0:
		out = append(out, fmt.Sprintf("fewer GPUs: %s free on %s now; asking for %d (themis.gpus = %d) would fit there", plural(bestFree, "GPU"), bestNode, bestFree, bestFree))
	case want > nodeSize && total > 0:
		out = append(out, fmt.Sprintf("fewer GPUs: it asks for %d, more than a node's %d, so it runs as a gang on whole nodes; %s free in all", want, nodeSize, plural(total, "GPU")))
	default:
		out = append(out, "no GPU it could use is free now")
	}
	for _, vc := range nodes.VCs {
		if vc.Name != job.Request.VC && vc.Free >= want {
			out = append(out, fmt.Sprintf("another virtual cluster: %s has %s free in its cells (themis.vc = %q, if the job's namespace may use it)", vc.Name, plural(vc.Free, "GPU"), vc.Name))
		}
	}
	var ends []string
	var held []httpapi.Lease
	for _, l := range ls.Leases {
		if l.Job != job.Job {
			held = append(held, l)
		}
	}
	slices.SortFunc(held, func(a, b httpapi.Lease) int { return endOf(a).Compare(endOf(b)) })
	for _, l := range held {
		if len(ends) == 3 {
			break
		}
		switch {
		case l.Revoke != nil:
			ends = append(ends, fmt.Sprintf("%s's %s on %s free up by %s (it is being preempted: %s)", l.Job, plural(len(l.GPUs), "GPU"), nodeNames(l), clock(l.Revoke.Deadline), l.Revoke.Reason))
		case !l.Ends.IsZero():
			in := ""
			if d := l.Ends.Sub(now); d > 0 {
				in = " (in " + d.Round(time.Second).String() + ")"
			}
			ends = append(ends, fmt.Sprintf("%s's lease of %s on %s ends at %s%s", l.Job, plural(len(l.GPUs), "GPU"), nodeNames(l), clock(l.Ends), in))
		}
	}
	out = append(out, ends...)
	if len(ends) < len(held) {
		n, verb := len(held)-len(ends), "are"
		if n == 1 {
			verb = "is"
		}
		out = append(out, fmt.Sprintf("%s %s held until their jobs end or the %s policy preempts them", plural(n, "other lease"), verb, cmp.Or(nodes.Policy, "planner's")))
	}
	return out
}

// endOf is when a lease's GPUs are due back: a revoke's deadline, a
// lease's end, or never (the far future).
func endOf(l httpapi.Lease) time.Time {
	switch {
	case l.Revoke != nil:
		return l.Revoke.Deadline
	case !l.Ends.IsZero():
		return l.Ends
	}
	return time.Unix(1<<40, 0)
}

func nodeNames(l httpapi.Lease) string {
	var names []string
	for _, p := range l.Nodes() {
		names = append(names, p.NodeName)
	}
	return strings.Join(names, ",")
}

func aheadNote(ahead []httpapi.Queued) string {
	if len(ahead) == 0 {
		return " (it is next: the policy places it in its next round, or keeps the GPUs for another reason it gives)"
	}
	gpus := 0
	for _, a := range ahead {
		gpus += a.GPUs
	}
	return fmt.Sprintf(" (%s ahead of it, asking for %s)", plural(len(ahead), "job"), plural(gpus, "GPU"))
}

// explainFromConsul is the job's status record, where no planner serves
// the API.
func explainFromConsul(ctx context.Context, store *consul.Store, key core.JobKey) (explanation, error) {
	sts, err := store.Statuses(ctx)
	if _, err = consul.Unreadable(err); err != nil {
		return explanation{}, err
	}
	for _, st := range sts {
		if st.Namespace == key.Namespace && st.JobID == key.ID {
			x := explanation{Job: key.String(), State: httpapi.ShownState(st.State, st.Reason), Reason: st.Reason, Since: st.Since, Held: st.Held, Preemptions: st.Preemptions, Source: "consul"}
			if st.Node != "" {
				x.Lease = &httpapi.Lease{Job: key.String(), State: httpapi.LeaseGranted}
				x.Lease.LeaseID, x.Lease.NodeName, x.Lease.GPUs, x.Lease.Namespace, x.Lease.JobID = st.LeaseID, st.Node, st.GPUs, key.Namespace, key.ID
				if !st.Deadline.IsZero() {
					x.Lease.State = httpapi.LeaseRevoking
				}
			}
			return x, nil
		}
	}
	return explanation{}, errors.New("no status record for " + key.String() + " in Consul (themis/status/): the planner has not seen such a themis job")
}

func printExplanation(out io.Writer, x explanation) {
	row := func(k, v string) { fmt.Fprintf(out, "%-12s %s\n", k, v) }
	row("Job", safe(x.Job))
	state := x.State
	if !x.Since.IsZero() {
		state += " (since " + clock(x.Since) + ")"
	}
	row("State", safe(state))
	if x.Reason != "" {
		row("Why", safe(x.Reason))
	}
	if x.Held != "" {
		// What Nomad shows of it: dead, count 0, its version tagged.
		row("In Nomad", "held at count 0 (dead in nomad job status; version tag "+nomad.HeldTag+": "+safe(x.Held)+")")
	}
	if r := x.Request; r != nil {
		row("Asks for", fmt.Sprintf("%s in virtual cluster %s, priority %d, class %s", plural(r.GPUs, "GPU"), safe(cmp.Or(r.VC, "default")), r.Priority, safe(r.Class)))
	}
	if l := x.Lease; l != nil {
		what := fmt.Sprintf("%s: %s on %s (%s)", safe(l.LeaseID), plural(len(l.GPUs), "GPU"), safe(nodeNames(*l)), safe(strings.Join(l.GPUs, ",")))
		if !l.GrantedAt.IsZero() {
			what += ", granted " + clock(l.GrantedAt)
		}
		if !l.Ends.IsZero() {
			what += ", ends " + clock(l.Ends)
		}
		row("Lease", what)
		if l.Revoke != nil {
			row("Preempted", safe(l.Revoke.Reason)+"; checkpointing until "+clock(l.Revoke.Deadline))
		}
	}
	if x.Preemptions > 0 {
		row("Preemptions", fmt.Sprint(x.Preemptions))
	}
	for i, d := range x.Preempted {
		row(map[bool]string{true: "Preempted at"}[i == 0], clock(d.Time)+" on "+safe(d.Node)+": "+safe(d.Reason))
	}
	if x.Position > 0 {
		row("Queue", fmt.Sprintf("position %d in %s", x.Position, queueName(x.VC)))
		fmt.Fprintln(out, "\nAhead of it")
		switch {
		case len(x.Ahead) == 0 && len(x.BlockedBy) > 0:
			fmt.Fprintln(out, "  nothing: it is first, and waits on the leases below")
		case len(x.Ahead) == 0:
			fmt.Fprintln(out, "  nothing: it is first")
		}
		for _, a := range x.Ahead {
			fmt.Fprintf(out, "  %d. %s (%s, %s): %s\n", a.Position, safe(a.Job), plural(a.GPUs, "GPU"), safe(a.State), safe(a.Reason))
		}
	}
	printBlockers(out, x.BlockedBy, x.policy, x.now)
	if len(x.Options) > 0 {
		fmt.Fprintln(out, "\nWhat would let it run")
		for _, op := range x.Options {
			fmt.Fprintf(out, "  - %s\n", safe(op))
		}
	}
	if x.Source == "consul" {
		fmt.Fprintln(out, "\n(from Consul's status record: the planner's API tells the queue and what would let it run)")
	}
}

func queueName(vc string) string {
	if vc == "" {
		return "the queue"
	}
	return "virtual cluster " + safe(vc) + "'s queue"
}

// plural is "1 GPU", "2 GPUs".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
