package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/report"
	"github.com/themis-nomad/themis/planner/sim"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
	"github.com/themis-nomad/themis/planner/workload"
)

type simCommand struct{ ui cli.Ui }

// simMemoryLimit is the soft memory limit of a simulation (the issue's
// bar is 2 GB).
const simMemoryLimit = 1536 << 20

func (c *simCommand) Synopsis() string { return "Replay a trace through a policy in the simulator" }

func (c *simCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis sim (--trace FILE | --workload NAME) --cluster PRESET_OR_FILE
                  --policy NAME[,NAME...] [--sweep KNOB=V1,V2,...]...
                  [--vc-config FILE [--vc-mode MODE]]
                  [--seed N] [--set k=v]... --out DIR
       themis sim --from-live ADDR [--policy NAME] [--vc-config FILE]
                  [--set k=v]... [--assume-remaining DURATION] [--json]

  With --from-live, a what-if of the live cluster: it reads the planner's
  API at ADDR (its nodes and cells, the jobs waiting and running with the
  service they had and their progress, the queues' order) and replays
  them from now on, once under the planner's policy and virtual clusters
  and once under --policy (with --set) and --vc-config, and prints each
  job's predicted wait under both, side by side (--json: as JSON). A job's
  work left comes from its progress reports and planned iterations; one
  that reports none is given --assume-remaining (default 1h), marked *.
  The current run uses the planner's policy with default knobs and, with
  virtual clusters, its VCs' cells as /v1/nodes shows them.

  Replays a trace (Philly or Tiresias CSV, detected from the header), or a
  generated workload, on a simulated cluster through the planner's decision
  core. With one policy it writes DIR/summary.json, jobs.csv, report.md and
  plots; with several it runs each on the same jobs and cluster and writes
  DIR/comparison.md (factor of improvement over the first policy, or
  --reference) plus each run in DIR/<policy>/. --sweep runs each policy once
  per value of a knob, as "policy[knob=value]"; several --sweep run every
  combination, as "policy[k1=v1,k2=v2]". A swept workload.* knob (say
  workload.arrival_scale or workload.seed) generates the workload anew for
  each value; DIR/sweep.md then tabulates every run and the medians over
  workload.seed, with a rho CDF per setting of the other swept knobs.

  With --vc-config (virtual clusters and their cells, HCL; see
  examples/philly-vcs.hcl and docs/simulator.md) every job runs in its trace
  VC, the policy ordering each VC's queue: --vc-mode hived binds each VC's
  cells by HiveD's buddy allocation; hived-overflow also runs a job that
  does not fit its VC's cells on idle GPUs as opportunistic, preempted when
  a guaranteed job needs them; quota caps each VC at its cells' GPUs placed
  anywhere (best fit), quota-yarn the same placed first fit (YARN-CS),
  quota-gandiva by Gandiva's job-size affinity. Each VC's private cluster (its cells alone) is run too,
  and summary.json compares them: vcs, sharing_anomalies,
  max_excess_queue_s.

  Workloads: fitgpp (the FitGpp paper's TE/BE jobs, Appendix A; knobs
  workload.jobs=2^19, workload.seed (default --seed), workload.te_fraction=0.3,
  workload.load=2.0, workload.arrivals=fifo|poisson, workload.nodes=84,
  workload.node_cpus=32, workload.node_memory_gb=256, workload.node_gpus=8,
  workload.te_gpus=1 (mean TE GPUs);
  run it on --cluster fitgpp84). themis-w1, themis-w2 (the Themis paper's
  workloads from philly.csv: --trace, default ../shared/traces/philly.csv;
  knobs workload.apps, workload.max_jobs, ... as in docs/themis.md, and
  workload.arrival_scale=1 to scale arrival times; run them on --cluster
  themis). themis-fig18 (Figure 18's 8 identical apps; --cluster
  themis-fig18; workload.fig18_jobs=1, workload.fig18_duration=4h).

  Policies: ` + strings.Join(stack.Names(), ", ") + `
  Clusters: ` + strings.Join(cluster.Presets(), ", ") + `, philly-<GPUs>,
            r<racks>n<nodes>g<GPUs>, or a topology file

  Knobs (--set): tiresias.queues=3200s[,...], tiresias.promote_knob=inf,
  tiresias.promote_every=DURATION (check promotions at its multiples),
  tiresias.pack_limit=1.0, tiresias.order=running|start (inside a queue:
  running jobs first, or by first start alone), tiresias.gittins_dist=FILE (2D-Gittins job-size
  samples; learned from finished jobs when absent), fitgpp.s=4.0,
  fitgpp.max_preemptions=1, sim.checkpoint_s=10, sim.restore_s=20,
  sim.checkpoint_every=0 (seconds of execution between periodic
  checkpoints: a preempted job loses the work since its newest one; 0 =
  it checkpoints when preempted and loses nothing),
  preempt.victims=policy|least-lost-work (prefer, where a policy has a
  choice, the victim that loses the least work), preempt.tie=0 (with
  least-lost-work: victims whose scores differ by at most this fraction
  tie, and the least lost work decides),
  sim.semantics=ours|tiresias (tiresias: the Tiresias simulator's model
  and disciplines, docs/tiresias.md), sim.scheme=count|yarn (its
  placement schemes), themis.f=0.8, themis.lease=10m,
  themis.lie=APP:+X%, themis.lie_remaining=APP:+X%,
  themis.filter_remaining=reported|truth|as-run (what the filter ranks
  apps by; docs/themis.md), themis.filter_estimate=current|whole|fluid
  (the current rho estimate the filter and the reservation rank by),
  themis.early_end=on|off, themis.early_end_rho=1 (the early lease end's
  target ρ), themis.early_end_victim=1|target (spelt themis.revoke,
  themis.revoke_rho and themis.revoke_victim before #34; still accepted). See docs/simulator.md,
  docs/checkpoints-sim.md, docs/tiresias.md and docs/themis.md.

Options:
` + flagHelp(simFlags(&simOptions{})))
}

type simOptions struct {
	trace, workload                 string
	vcConfig, vcMode                string
	cluster, policy, out, reference string
	seed                            int64
	sets, sweep                     stringList
	quiet                           bool
	cpuprofile                      string
	// fromLive is --from-live's planner API: a what-if of the live
	// cluster (simlive.go); assume the work given to a job that reports
	// no progress; json its output.
	fromLive string
	assume   time.Duration
	json     bool
	// given are the flags given on the command line.
	given map[string]bool
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func simFlags(o *simOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.StringVar(&o.trace, "trace", "", "trace file (Philly or Tiresias CSV)")
	fs.StringVar(&o.workload, "workload", "", "generated workload instead of a trace: fitgpp, themis-w1, themis-w2 (from --trace, default ../shared/traces/philly.csv), themis-fig18")
	fs.Var(&o.sweep, "sweep", "run each policy once per value of a knob: KNOB=V1,V2,... (repeatable: every combination)")
	fs.StringVar(&o.vcConfig, "vc-config", "", "virtual clusters, their cells and optionally each one's policy and knobs (HCL), for a run in virtual clusters")
	fs.StringVar(&o.vcMode, "vc-mode", string(stack.PlaceHived), "with --vc-config: hived (cells), hived-overflow (cells, overflow as opportunistic), quota (GPU counts, best fit) quota-yarn (GPU counts, first fit) or quota-gandiva (GPU counts, size affinity)")
	fs.StringVar(&o.cluster, "cluster", "n8g8", "cluster preset or topology file")
	fs.StringVar(&o.policy, "policy", "fifo", "policy, or a comma-separated list for a comparison")
	fs.StringVar(&o.reference, "reference", "", "reference policy of a comparison (default: the first)")
	fs.Int64Var(&o.seed, "seed", 1, "random seed (model assignment for traces without models)")
	fs.Var(&o.sets, "set", "knob key=value (repeatable)")
	fs.StringVar(&o.out, "out", "", "output folder (required)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a Go CPU profile of the whole command to FILE (go tool pprof)")
	fs.StringVar(&o.fromLive, "from-live", "", "a what-if of the live cluster: the planner's API (e.g. http://127.0.0.1:4680) whose queue, running jobs and cells to replay under the planner's setting and under --policy and --vc-config")
	fs.DurationVar(&o.assume, "assume-remaining", time.Hour, "with --from-live: the work left of a job that reports no progress")
	fs.BoolVar(&o.json, "json", false, "with --from-live: print the comparison as JSON")
	return fs
}

func (c *simCommand) Run(args []string) int {
	var o simOptions
	fs := simFlags(&o)
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.given[f.Name] = true })
	if o.fromLive != "" {
		if err := c.runFromLive(o, os.Stdout); err != nil {
			c.ui.Error("themis sim: " + safe(err.Error()))
			return 1
		}
		return 0
	}
	if o.cpuprofile != "" {
		stop, err := startCPUProfile(o.cpuprofile)
		if err != nil {
			c.ui.Error("themis sim: --cpuprofile: " + err.Error())
			return 1
		}
		defer stop()
	}
	if err := c.run(o); err != nil {
		c.ui.Error("themis sim: " + err.Error())
		return 1
	}
	return 0
}

// startCPUProfile profiles the process into file until stop is called.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func (c *simCommand) run(o simOptions) error {
	// A simulation is a batch job that allocates many short-lived values;
	// trading memory for fewer collections makes it markedly faster. The
	// soft limit makes the collector work harder instead once the heap
	// nears it (2^19 FitGpp jobs would otherwise take 3.5 GB).
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(simMemoryLimit)
	switch {
	case o.trace == "" && o.workload == "":
		return fmt.Errorf("give one of --trace and --workload")
	case o.trace != "" && o.workload != "" && o.workload != workload.FormatThemisW1 && o.workload != workload.FormatThemisW2:
		return fmt.Errorf("give one of --trace and --workload (--trace with --workload is the source trace of themis-w1 and themis-w2)")
	case o.out == "":
		return fmt.Errorf("--out is required")
	}
	// One set of knobs serves every policy of the run: each takes its own
	// namespace, and a knob that none of them (nor the simulator) used is
	// an error before anything runs.
	knobs, err := core.ParseKnobs(o.sets)
	if err != nil {
		return err
	}
	tr, err := loadJobs(o, knobs)
	if err != nil {
		return err
	}
	// A swept workload knob generates the workload anew for each value.
	traces := map[string]*trace.Trace{"": tr}
	traceOf := func(extra []string) (*trace.Trace, error) {
		var key []string
		for _, kv := range extra {
			if strings.HasPrefix(kv, "workload.") {
				key = append(key, kv)
			}
		}
		k := strings.Join(key, ",")
		if t, ok := traces[k]; ok {
			return t, nil
		}
		kn, err := knobs.With(key...)
		if err != nil {
			return nil, err
		}
		t, err := loadJobs(o, kn)
		if err != nil {
			return nil, err
		}
		for _, u := range traces {
			if u.Name == t.Name {
				// Runs are grouped by trace name (comparisons, shared T_id):
				// a generated trace whose name does not say the swept knob
				// gets it added.
				t.Name += "[" + k + "]"
				break
			}
		}
		traces[k] = t
		return t, nil
	}
	cl, err := cluster.FromPresetOrFile(o.cluster)
	if err != nil {
		return err
	}
	ckpt, restore, err := sim.Costs(knobs)
	if err != nil {
		return err
	}
	sem, err := stack.Semantics(knobs)
	if err != nil {
		return err
	}
	if sem == stack.SemanticsTiresias && o.vcConfig != "" {
		return fmt.Errorf("sim.semantics=tiresias has no virtual clusters")
	}
	var vcs *hived.Config
	if o.vcConfig != "" {
		src, err := os.ReadFile(o.vcConfig)
		if err != nil {
			return fmt.Errorf("--vc-config: %w", err)
		}
		if vcs, err = hived.ParseConfig(o.vcConfig, src); err != nil {
			return err
		}
	}
	// A sweep's variants add one knob each to the run's; they share the
	// run's record of used knobs, so that the check below sees them all.
	type run struct {
		label, name string
		pol         core.Policy
		sets, extra []string
		every       float64          // sim.checkpoint_every
		victims     core.VictimOrder // preempt.victims
		tie         float64          // preempt.tie
	}
	variants := []run{{sets: o.sets}}
	for _, sw := range o.sweep {
		key, vals, ok := strings.Cut(sw, "=")
		if !ok || strings.TrimSpace(key) == "" || strings.TrimSpace(vals) == "" {
			return fmt.Errorf("--sweep %q: want KNOB=V1,V2,...", sw)
		}
		var next []run
		for _, base := range variants {
			for _, v := range strings.Split(vals, ",") {
				kv := strings.TrimSpace(key) + "=" + strings.TrimSpace(v)
				extra := append(append([]string{}, base.extra...), kv)
				next = append(next, run{label: "[" + strings.Join(extra, ",") + "]", sets: append(append([]string{}, base.sets...), kv), extra: extra})
			}
		}
		variants = next
	}
	for _, v := range variants {
		if _, err := traceOf(v.extra); err != nil {
			return err
		}
	}
	var runs []run
	var derived []core.Knobs
	for _, name := range strings.Split(o.policy, ",") {
		for _, v := range variants {
			k, err := knobs.With(v.extra...)
			if err != nil {
				return err
			}
			st, err := stack.Build(strings.TrimSpace(name), stack.Options{Knobs: k, VCs: vcs, Placement: stack.Placement(vcMode(vcs, o.vcMode))})
			if err != nil {
				return err
			}
			pol, victims, tie := st.Policy, st.Victims, st.VictimTie
			if _, _, err := sim.Costs(k); err != nil {
				return err
			}
			every, err := sim.CheckpointEvery(k)
			if err != nil {
				return err
			}
			runs = append(runs, run{label: pol.Name() + v.label, pol: pol, sets: v.sets, extra: v.extra, name: strings.TrimSpace(name),
				every: every, victims: victims, tie: tie})
			derived = append(derived, k)
		}
	}
	for _, k := range append(derived, knobs) {
		if err := k.Unused(); err != nil {
			return fmt.Errorf("--set or --sweep: %w (no policy of this run uses it)", err)
		}
	}
	var results []sim.Result
	for _, rn := range runs {
		pol := rn.pol
		tr, err := traceOf(rn.extra)
		if err != nil {
			return err
		}
		cfg := sim.Config{Trace: tr, Cluster: cl, Policy: pol, Seed: o.seed, Settings: rn.sets,
			CheckpointCost: ckpt, RestoreCost: restore, CheckpointEvery: rn.every, Victims: rn.victims, VictimTie: rn.tie,
			Peer: sem == stack.SemanticsTiresias}
		if !o.quiet {
			cfg.Progress = progressBar(rn.label, time.Now())
		}
		var r *sim.Result
		if vcs != nil {
			rn := rn
			r, err = sim.RunVCs(sim.VCRun{Config: cfg, VCs: vcs, Mode: stack.Placement(o.vcMode), NewPolicy: func() (core.Policy, error) {
				k, err := knobs.With(rn.extra...)
				if err != nil {
					return nil, err
				}
				st, err := stack.Build(rn.name, stack.Options{Knobs: k, VCs: vcs, Placement: stack.Placement(o.vcMode)})
				if err != nil {
					return nil, err
				}
				return st.Policy, nil
			}})
		} else {
			r, err = sim.Run(cfg)
		}
		if err != nil {
			return err
		}
		r.Policy = rn.label
		if !o.quiet {
			fmt.Fprintf(os.Stderr, "\n")
		}
		c.ui.Info(fmt.Sprintf("%s: %d jobs on %s (%d GPUs) in %.1fs", rn.label, len(r.Jobs), cl.Name, cl.TotalGPUs(), r.WallSeconds))
		results = append(results, *r)
	}
	if err := fairness(o, results, traces, cl); err != nil {
		return err
	}
	if len(results) == 1 {
		if err := report.WriteRun(o.out, results[0]); err != nil {
			return err
		}
		c.ui.Output("wrote " + filepath.Join(o.out, "summary.json") + " and report.md")
		return nil
	}
	ref := o.reference
	if ref == "" {
		ref = results[0].Policy
	}
	var names []string
	byTrace := map[string][]sim.Result{}
	for _, r := range results {
		if _, ok := byTrace[r.Trace]; !ok {
			names = append(names, r.Trace)
		}
		byTrace[r.Trace] = append(byTrace[r.Trace], r)
	}
	if len(names) == 1 {
		if err := report.WriteComparison(o.out, results, ref); err != nil {
			return err
		}
		c.ui.Output("wrote " + filepath.Join(o.out, "comparison.md"))
	} else {
		// A swept workload: one comparison per generated trace.
		for _, n := range names {
			rs := byTrace[n]
			r := rs[0].Policy
			if slices.ContainsFunc(rs, func(x sim.Result) bool { return x.Policy == ref }) {
				r = ref
			}
			if err := report.WriteComparison(filepath.Join(o.out, n), rs, r); err != nil {
				return err
			}
			c.ui.Output("wrote " + filepath.Join(o.out, n, "comparison.md"))
		}
	}
	if len(names) > 1 || len(o.sweep) > 1 {
		if err := report.WriteSweep(o.out, results); err != nil {
			return err
		}
		c.ui.Output("wrote " + filepath.Join(o.out, report.SweepFile))
	}
	return nil
}

// fairness adds what ρ needs beyond one run: each app's T_id shared by the
// runs on the same trace (sim.ShareIdeal), and, for the Themis workloads,
// each app's floor, its ρ alone on the empty cluster (sim.Floors).
func fairness(o simOptions, results []sim.Result, traces map[string]*trace.Trace, cl *cluster.Cluster) error {
	ptrs := make([]*sim.Result, len(results))
	for i := range results {
		ptrs[i] = &results[i]
	}
	sim.ShareIdeal(ptrs)
	switch o.workload {
	case workload.FormatThemisW1, workload.FormatThemisW2, workload.FormatThemisFig18:
	default:
		return nil
	}
	used := map[string]bool{}
	for _, r := range results {
		used[r.Trace] = true
	}
	floors := map[string]map[string]float64{}
	for _, t := range traces {
		if _, ok := floors[t.Name]; ok || !used[t.Name] {
			continue
		}
		f, err := sim.Floors(t, cl, o.seed)
		if err != nil {
			return fmt.Errorf("floors of %s: %w", t.Name, err)
		}
		floors[t.Name] = f
	}
	for i := range results {
		sim.SetFloors(&results[i], floors[results[i].Trace])
	}
	return nil
}

// progressBar draws "policy [#####     ] 52% 42766/82247 jobs 3.1s" on stderr.
func progressBar(name string, start time.Time) func(done, total int) {
	return func(done, total int) {
		const width = 30
		filled := 0
		if total > 0 {
			filled = done * width / total
		}
		fmt.Fprintf(os.Stderr, "\r%-16s [%s%s] %3d%% %d/%d jobs %.1fs", name,
			strings.Repeat("#", filled), strings.Repeat(" ", width-filled),
			done*100/max(total, 1), done, total, time.Since(start).Seconds())
	}
}

// vcMode is the virtual-cluster placement of a run: none without a VC config.
func vcMode(vcs *hived.Config, mode string) string {
	if vcs == nil {
		return ""
	}
	return mode
}
