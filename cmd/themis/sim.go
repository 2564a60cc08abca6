package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/report"
	"github.com/themis-nomad/themis/planner/sim"
	"github.com/themis-nomad/themis/planner/trace"
)

type simCommand struct{ ui cli.Ui }

func (c *simCommand) Synopsis() string { return "Replay a trace through a policy in the simulator" }

func (c *simCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis sim --trace FILE --cluster PRESET_OR_FILE --policy NAME[,NAME...]
                  [--seed N] [--set k=v]... --out DIR

  Replays a trace (Philly or Tiresias CSV, detected from the header) on a
  simulated cluster through the planner's decision core. With one policy it
  writes DIR/summary.json, jobs.csv, report.md and plots; with several it runs
  each on the same trace and cluster and writes DIR/comparison.md (factor of
  improvement over the first policy, or --reference) plus each run in
  DIR/<policy>/.

  Policies: ` + strings.Join(core.Names(), ", ") + `
  Clusters: ` + strings.Join(cluster.Presets(), ", ") + `, philly-<GPUs>,
            r<racks>n<nodes>g<GPUs>, or a topology file

  Knobs (--set): tiresias.queues=3200s[,...], tiresias.promote_knob=inf,
  tiresias.pack_limit=1.0, tiresias.gittins_dist=FILE (2D-Gittins job-size
  samples; learned from finished jobs when absent), sim.checkpoint_s=10,
  sim.restore_s=20. See docs/simulator.md.

Options:
` + flagHelp(simFlags(&simOptions{})))
}

type simOptions struct {
	trace, cluster, policy, out, reference string
	seed                                   int64
	sets                                   stringList
	quiet                                  bool
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func simFlags(o *simOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.StringVar(&o.trace, "trace", "", "trace file (Philly or Tiresias CSV)")
	fs.StringVar(&o.cluster, "cluster", "n8g8", "cluster preset or topology file")
	fs.StringVar(&o.policy, "policy", "fifo", "policy, or a comma-separated list for a comparison")
	fs.StringVar(&o.reference, "reference", "", "reference policy of a comparison (default: the first)")
	fs.Int64Var(&o.seed, "seed", 1, "random seed (model assignment for traces without models)")
	fs.Var(&o.sets, "set", "knob key=value (repeatable)")
	fs.StringVar(&o.out, "out", "", "output folder (required)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	return fs
}

func (c *simCommand) Run(args []string) int {
	var o simOptions
	fs := simFlags(&o)
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := c.run(o); err != nil {
		c.ui.Error("themis sim: " + err.Error())
		return 1
	}
	return 0
}

func (c *simCommand) run(o simOptions) error {
	// A simulation is a batch job that allocates many short-lived values;
	// trading memory for fewer collections makes it markedly faster, and a
	// Philly-scale run still stays far below 2 GB.
	debug.SetGCPercent(400)
	switch {
	case o.trace == "":
		return fmt.Errorf("--trace is required")
	case o.out == "":
		return fmt.Errorf("--out is required")
	}
	tr, err := trace.Load(o.trace)
	if err != nil {
		return err
	}
	cl, err := cluster.FromPresetOrFile(o.cluster)
	if err != nil {
		return err
	}
	// One set of knobs serves every policy of the run: each takes its own
	// namespace, and a knob that none of them (nor the simulator) used is
	// an error before anything runs.
	knobs, err := core.ParseKnobs(o.sets)
	if err != nil {
		return err
	}
	ckpt, restore, err := sim.Costs(knobs)
	if err != nil {
		return err
	}
	var policies []core.Policy
	for _, name := range strings.Split(o.policy, ",") {
		pol, err := core.NewPolicy(strings.TrimSpace(name), knobs)
		if err != nil {
			return err
		}
		if err := sim.PreparePolicy(pol); err != nil {
			return err
		}
		policies = append(policies, pol)
	}
	if err := knobs.Unused(core.KnobNamespaces...); err != nil {
		return fmt.Errorf("--set: %w (no policy of this run uses it)", err)
	}
	var results []sim.Result
	for _, pol := range policies {
		cfg := sim.Config{Trace: tr, Cluster: cl, Policy: pol, Seed: o.seed, Settings: o.sets,
			CheckpointCost: ckpt, RestoreCost: restore}
		if !o.quiet {
			cfg.Progress = progressBar(pol.Name(), time.Now())
		}
		r, err := sim.Run(cfg)
		if err != nil {
			return err
		}
		if !o.quiet {
			fmt.Fprintf(os.Stderr, "\n")
		}
		c.ui.Info(fmt.Sprintf("%s: %d jobs on %s (%d GPUs) in %.1fs", pol.Name(), len(r.Jobs), cl.Name, cl.TotalGPUs(), r.WallSeconds))
		results = append(results, *r)
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
	if err := report.WriteComparison(o.out, results, ref); err != nil {
		return err
	}
	c.ui.Output("wrote " + filepath.Join(o.out, "comparison.md"))
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
