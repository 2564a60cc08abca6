package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/sim"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

// themis sim --from-live: the live cluster's queue, running jobs and
// cells, replayed in the simulator under the planner's setting and under a
// proposed one, each job's predicted wait side by side.

// liveSnapshot is what the what-if replays: the jobs now waiting or
// running, each with the work it has left, on the cluster's nodes.
type liveSnapshot struct {
	at      time.Time
	policy  string
	vcs     *hived.Config // the planner's VCs as /v1/nodes shows them (nil: none)
	cluster *cluster.Cluster
	trace   *trace.Trace
	// state and assumed are each job's state now and whether its
	// remaining work is assumed (it reports no progress to go by).
	state   map[string]string
	assumed map[string]bool
}

// snapshotLive reads the planner's API: nodes (cells), jobs (queued,
// suspended, running, with their service and progress) and queue order.
func snapshotLive(ctx context.Context, addr string, assume time.Duration, now time.Time) (*liveSnapshot, error) {
	c := &httpapi.Client{Addr: addr}
	var nodes httpapi.NodesResponse
	var jobs httpapi.JobsResponse
	var q httpapi.QueueResponse
	for path, out := range map[string]any{"/v1/nodes": &nodes, "/v1/jobs": &jobs, "/v1/queue": &q} {
		if _, err := c.Get(ctx, path, 0, 0, out); err != nil {
			return nil, fmt.Errorf("--from-live %s: %w", addr, err)
		}
	}
	s := &liveSnapshot{at: now, policy: cmp.Or(nodes.Policy, q.Policy), state: map[string]string{}, assumed: map[string]bool{},
		cluster: &cluster.Cluster{Name: "live"}, trace: &trace.Trace{Name: "live-" + now.UTC().Format("20060102T150405Z"), Format: "live"}}
	for _, n := range nodes.Nodes {
		node := core.Node{ID: n.ID, Name: n.Name, Rack: n.Rack, Schedulable: n.Schedulable}
		for _, g := range n.GPUs {
			node.GPUs = append(node.GPUs, core.GPU{ID: g.ID, Index: g.Index, Path: slices.Clone(g.Path), Healthy: g.Healthy})
		}
		s.cluster.Nodes = append(s.cluster.Nodes, node)
	}
	if len(nodes.VCs) > 0 {
		s.vcs = &hived.Config{}
		for _, vc := range nodes.VCs {
			x := hived.VCConfig{Name: vc.Name, Pin: slices.Clone(vc.Pinned)}
			for _, t := range slices.Sorted(func(yield func(string) bool) {
				for k := range vc.Cells {
					if !yield(k) {
						return
					}
				}
			}) {
				x.Cells = append(x.Cells, hived.CellCount{Type: t, Count: vc.Cells[t]})
			}
			s.vcs.VCs = append(s.vcs.VCs, x)
		}
	}
	// The order jobs enter the replay: those running now (by when they
	// were granted), then the waiting ones in queue order.
	rank := map[string]int{}
	for _, vc := range q.VCs {
		for _, j := range vc.Jobs {
			rank[j.Job] = j.Position
		}
	}
	var live []*httpapi.Job
	for _, j := range jobs.Jobs {
		switch j.State {
		case "queued", httpapi.StateWaiting, "suspended", "granted", "revoking":
			if j.Request != nil {
				live = append(live, j)
			}
		}
	}
	running := func(j *httpapi.Job) bool { return j.Lease != nil }
	sort.SliceStable(live, func(a, b int) bool {
		x, y := live[a], live[b]
		switch {
		case running(x) != running(y):
			return running(x)
		case running(x):
			return x.Lease.GrantedAt.Before(y.Lease.GrantedAt)
		case rank[x.Job] != rank[y.Job]:
			return rank[x.Job] < rank[y.Job]
		}
		return x.Record.FirstSubmit.Before(y.Record.FirstSubmit)
	})
	for _, j := range live {
		tj := trace.Job{Line: len(s.trace.Jobs) + 2, ID: j.Job, GPUs: j.Request.GPUs, VC: cmp.Or(j.Request.VC, "default"),
			Model: j.Request.Model, Class: j.Request.Class, App: j.Request.App,
			Executed: j.Record.Executed, Attained: j.Record.Attained}
		if tj.App == "" {
			tj.App = j.Job
		}
		if j.Lease != nil {
			// The current lease's service so far (its task started a
			// little after the grant).
			ran := max(0, now.Sub(j.Lease.GrantedAt).Seconds())
			tj.Executed += ran
			tj.Attained += ran * float64(len(j.Lease.GPUs))
		}
		left, ok := remaining(j)
		if !ok {
			left = assume.Seconds()
			s.assumed[j.Job] = true
		}
		tj.Duration = left
		s.trace.Jobs = append(s.trace.Jobs, tj)
		s.state[j.Job] = j.State
	}
	return s, nil
}

// remaining is a job's work left in seconds, from its progress report and
// its planned iterations; ok is false when they do not tell it.
func remaining(j *httpapi.Job) (float64, bool) {
	p := j.Progress
	if p == nil || p.Rate <= 0 {
		return 0, false
	}
	total := p.Total
	if total <= 0 && j.Request != nil {
		total = int64(j.Request.Iterations)
	}
	if total <= 0 {
		return 0, false
	}
	return max(0, float64(total-p.Iteration)/p.Rate), true
}

// whatIfRun is one replay of the snapshot.
type whatIfRun struct {
	Policy   string `json:"policy"`
	VCConfig string `json:"vc_config"`
	// MeanWaitS and MedianWaitS are over the jobs waiting now.
	MeanWaitS   float64 `json:"mean_wait_s"`
	MedianWaitS float64 `json:"median_wait_s"`
	MakespanS   float64 `json:"makespan_s"`
	Preemptions int     `json:"preemptions"`
}

// whatIfJob is one job's prediction under both settings.
type whatIfJob struct {
	Job             string       `json:"job"`
	GPUs            int          `json:"gpus"`
	VC              string       `json:"vc"`
	State           string       `json:"state"`
	RemainingS      float64      `json:"remaining_s"`
	RemainingAssume bool         `json:"remaining_assumed"`
	Current         jobPredicted `json:"current"`
	Proposed        jobPredicted `json:"proposed"`
}

type jobPredicted struct {
	// WaitS is how long it waits from now on before it first runs (and
	// after any preemption); StartS and EndS are from now, EndS -1 when
	// it does not finish in the replay.
	WaitS       float64 `json:"wait_s"`
	StartS      float64 `json:"start_s"`
	EndS        float64 `json:"end_s"`
	Preemptions int     `json:"preemptions"`
}

type whatIf struct {
	At       time.Time   `json:"at"`
	Source   string      `json:"source"`
	Current  whatIfRun   `json:"current"`
	Proposed whatIfRun   `json:"proposed"`
	Jobs     []whatIfJob `json:"jobs"`
	// AssumedRemainingS is the work given to jobs that report no progress.
	AssumedRemainingS float64 `json:"assumed_remaining_s"`
}

// replay runs the snapshot under a policy (with knobs) and VC config.
func replay(s *liveSnapshot, policy string, sets []string, vcs *hived.Config, seed int64) (*sim.Result, error) {
	knobs, err := core.ParseKnobs(sets)
	if err != nil {
		return nil, err
	}
	ckpt, restore, err := sim.Costs(knobs)
	if err != nil {
		return nil, err
	}
	mode := stack.PlaceFree
	if vcs != nil {
		mode = stack.PlaceHived
	}
	build := func() (*stack.Stack, error) {
		k, err := knobs.With()
		if err != nil {
			return nil, err
		}
		return stack.Build(policy, stack.Options{Knobs: k, VCs: vcs, Placement: mode})
	}
	st, err := build()
	if err != nil {
		return nil, err
	}
	if err := knobs.Unused(); err != nil {
		return nil, fmt.Errorf("--set: %w (the policy does not use it)", err)
	}
	cfg := sim.Config{Trace: s.trace, Cluster: s.cluster, Policy: st.Policy, Seed: seed, CheckpointCost: ckpt, RestoreCost: restore,
		Victims: st.Victims, VictimTie: st.VictimTie, EqualParts: true}
	if vcs == nil {
		return sim.Run(cfg)
	}
	return sim.RunVCs(sim.VCRun{Config: cfg, VCs: vcs, Mode: mode, NewPolicy: func() (core.Policy, error) {
		st, err := build()
		if err != nil {
			return nil, err
		}
		return st.Policy, nil
	}})
}

// compare puts the two replays side by side.
func compare(s *liveSnapshot, cur, prop *sim.Result, curRun, propRun whatIfRun, assume time.Duration, source string) whatIf {
	out := whatIf{At: s.at.UTC(), Source: source, Current: curRun, Proposed: propRun, AssumedRemainingS: assume.Seconds()}
	pred := func(r *sim.Result) map[string]jobPredicted {
		m := map[string]jobPredicted{}
		for _, j := range r.Jobs {
			p := jobPredicted{WaitS: j.Queue, StartS: j.Start, EndS: -1, Preemptions: j.Preemptions}
			if j.Finished {
				p.EndS = j.End
			}
			if !j.Started {
				p.StartS, p.WaitS = -1, -1
			}
			m[j.ID] = p
		}
		return m
	}
	pc, pp := pred(cur), pred(prop)
	var wc, wp []float64
	for _, tj := range s.trace.Jobs {
		x := whatIfJob{Job: tj.ID, GPUs: tj.GPUs, VC: tj.VC, State: s.state[tj.ID], RemainingS: tj.Duration,
			RemainingAssume: s.assumed[tj.ID], Current: pc[tj.ID], Proposed: pp[tj.ID]}
		out.Jobs = append(out.Jobs, x)
		if x.State == "queued" || x.State == httpapi.StateWaiting || x.State == "suspended" {
			wc, wp = append(wc, x.Current.WaitS), append(wp, x.Proposed.WaitS)
		}
	}
	stats := func(r *whatIfRun, res *sim.Result, waits []float64) {
		r.MeanWaitS, r.MedianWaitS = meanMedian(waits)
		r.MakespanS, r.Preemptions = res.Makespan, res.Preemptions
	}
	stats(&out.Current, cur, wc)
	stats(&out.Proposed, prop, wp)
	return out
}

func meanMedian(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	mid := s[len(s)/2]
	if len(s)%2 == 0 {
		mid = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return sum / float64(len(s)), mid
}

// runFromLive is themis sim --from-live.
func (c *simCommand) runFromLive(o simOptions, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.assume <= 0 {
		return fmt.Errorf("--assume-remaining %s: want a positive duration", o.assume)
	}
	s, err := snapshotLive(ctx, o.fromLive, o.assume, time.Now())
	if err != nil {
		return err
	}
	if len(s.trace.Jobs) == 0 {
		return fmt.Errorf("--from-live %s: no job waits or runs: nothing to replay", o.fromLive)
	}
	if s.policy == "" {
		return fmt.Errorf("--from-live %s: the planner has not decided a round yet (no policy in /v1/nodes)", o.fromLive)
	}
	curRun := whatIfRun{Policy: s.policy, VCConfig: "the planner's"}
	if s.vcs == nil {
		curRun.VCConfig = "none"
	}
	propRun := whatIfRun{Policy: s.policy, VCConfig: curRun.VCConfig}
	if o.given["policy"] {
		propRun.Policy = o.policy
	}
	propVCs := s.vcs
	if o.vcConfig != "" {
		src, err := os.ReadFile(o.vcConfig)
		if err != nil {
			return fmt.Errorf("--vc-config: %w", err)
		}
		if propVCs, err = hived.ParseConfig(o.vcConfig, src); err != nil {
			return err
		}
		propRun.VCConfig = o.vcConfig
	}
	cur, err := replay(s, curRun.Policy, nil, s.vcs, o.seed)
	if err != nil {
		return fmt.Errorf("the current setting (%s): %w", curRun.Policy, err)
	}
	prop, err := replay(s, propRun.Policy, o.sets, propVCs, o.seed)
	if err != nil {
		return fmt.Errorf("the proposed setting (%s): %w", propRun.Policy, err)
	}
	w := compare(s, cur, prop, curRun, propRun, o.assume, o.fromLive)
	if o.json {
		b, err := json.MarshalIndent(w, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	printWhatIf(out, w)
	return nil
}

func printWhatIf(out io.Writer, w whatIf) {
	fmt.Fprintf(out, "What if, from %s at %s: %d jobs (%d waiting), replayed from now on\n", safe(w.Source), clock(w.At), len(w.Jobs),
		countWaiting(w.Jobs))
	fmt.Fprintf(out, "  current:  %s, virtual clusters: %s\n  proposed: %s, virtual clusters: %s\n\n", safe(w.Current.Policy), safe(w.Current.VCConfig),
		safe(w.Proposed.Policy), safe(w.Proposed.VCConfig))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tGPUS\tVC\tSTATE\tREMAINING\tWAIT NOW\tWAIT PROPOSED\tCHANGE\tDONE IN NOW\tDONE IN PROPOSED")
	for _, j := range w.Jobs {
		rem := dur(j.RemainingS)
		if j.RemainingAssume {
			rem += "*"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(j.Job), j.GPUs, safe(j.VC), j.State, rem, dur(j.Current.WaitS), dur(j.Proposed.WaitS),
			change(j.Current.WaitS, j.Proposed.WaitS), dur(j.Current.EndS), dur(j.Proposed.EndS))
	}
	tw.Flush()
	fmt.Fprintf(out, "\nwaiting jobs' wait: mean %s now, %s proposed; median %s now, %s proposed\n",
		dur(w.Current.MeanWaitS), dur(w.Proposed.MeanWaitS), dur(w.Current.MedianWaitS), dur(w.Proposed.MedianWaitS))
	fmt.Fprintf(out, "all done in %s now, %s proposed; preemptions %d now, %d proposed\n", dur(w.Current.MakespanS), dur(w.Proposed.MakespanS),
		w.Current.Preemptions, w.Proposed.Preemptions)
	if slices.ContainsFunc(w.Jobs, func(j whatIfJob) bool { return j.RemainingAssume }) {
		fmt.Fprintf(out, "* no progress report to go by: assumed %s of work left (--assume-remaining)\n", dur(w.AssumedRemainingS))
	}
}

func countWaiting(js []whatIfJob) int {
	n := 0
	for _, j := range js {
		if j.State == "queued" || j.State == httpapi.StateWaiting || j.State == "suspended" {
			n++
		}
	}
	return n
}

// dur is seconds as a short duration ("-" for a negative: never).
func dur(s float64) string {
	if s < 0 || math.IsNaN(s) {
		return "-"
	}
	return (time.Duration(s) * time.Second).Round(time.Second).String()
}

func change(now, proposed float64) string {
	switch {
	case now < 0 || proposed < 0:
		return "-"
	case math.Abs(proposed-now) < 0.5:
		return "="
	case proposed < now:
		return "-" + dur(now-proposed)
	}
	return "+" + dur(proposed-now)
}
