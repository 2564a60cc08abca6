package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/cli"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/hived"
)

// themis vcs: the virtual clusters as the planner sees them (themis vcs
// init writes a VC config, vcs_init.go).
type vcsCommand struct{ viewCommand }

func (c *vcsCommand) Synopsis() string {
	return "Show the virtual clusters: their cells, GPUs used and free, and who holds them"
}

func (c *vcsCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis vcs [options]
       themis vcs -show FILE (who may use each VC of a config)
       themis vcs init --trace FILE --cluster PRESET_OR_FILE --cell TYPE... (writes a VC config)

  Shows each virtual cluster of the planner's -vc-config as the last round
  left it: every field the planner's API gives for it (its cells by type,
  guaranteed GPUs, those in use, free, lost to bad hardware, and whatever
  else the planner reports), then its virtual cells, each with its state,
  the physical cell it is bound to and the jobs holding it. It reads the
  leading planner's API (GET /v1/nodes, its "vcs"). Where no planner
  serves it, it lists what Consul's lease keys say of each VC: the jobs
  holding GPUs in it and their virtual cells; its capacity and free cells
  are known only to the planner.

  With -show FILE, prints which Nomad namespaces may use each virtual
  cluster of that VC config, and their limits: the highest priority, the
  classes, whether opportunistic jobs are allowed and whether the Themis
  filter ranks them by their progress reports (docs/hived.md, "Who may use
  a virtual cluster"). A VC no namespace block binds is closed: no
  namespace may use it until one does (namespace "*" {} opens it to every
  namespace). It reads only the file.

Options:
` + viewOptionsHelp + `
  -show FILE
    A VC config whose namespace bindings to print.`)
}

// vcsDoc is the view's document: the API's VC objects as they came (new
// fields pass through).
type vcsDoc struct {
	Policy    string          `json:"policy,omitempty"`
	Placement string          `json:"placement,omitempty"`
	VCs       json.RawMessage `json:"vcs"`
}

func (c *vcsCommand) Run(args []string) int {
	for _, a := range args {
		if name := strings.TrimLeft(a, "-"); a != name && slices.Contains([]string{"trace", "cell", "cluster", "out"}, strings.SplitN(name, "=", 2)[0]) {
			c.ui.Error("themis vcs: -" + name + " is a flag of themis vcs init, which writes a VC config from a trace; themis vcs shows the live ones")
			return 2
		}
	}
	var o viewOptions
	var show string
	rest, ok := c.parse("vcs", args, &o, func(fs *flag.FlagSet) {
		fs.StringVar(&show, "show", "", "a VC config whose namespace bindings to print")
	})
	if !ok || !noArgs(c.ui, "vcs", rest) {
		return 2
	}
	if show != "" {
		src, err := os.ReadFile(show)
		if err == nil {
			var cfg *hived.Config
			if cfg, err = hived.ParseConfig(show, src); err == nil {
				showBindings(c.stdout(), cfg)
				return 0
			}
		}
		c.ui.Error("themis vcs: " + err.Error())
		return 1
	}
	return c.run("vcs", func(ctx context.Context) error {
		var doc vcsDoc
		served, err := c.get(ctx, o, "/v1/nodes", &doc)
		if !served {
			if !isNotServed(err) {
				return err
			}
			store, ferr := c.fallback("vcs", o, err, ", which know each VC's jobs and cells in use, not its capacity")
			if ferr != nil {
				return ferr
			}
			if doc, err = vcsFromConsul(ctx, store, c.ui.Warn); err != nil {
				return err
			}
		}
		if len(doc.VCs) == 0 {
			doc.VCs = json.RawMessage("[]")
		}
		objs, err := decodeObjects(doc.VCs)
		if err != nil {
			return fmt.Errorf("the API's vcs: %w", err)
		}
		return c.emit(o, doc, func(w io.Writer) { printVCs(w, objs) })
	})
}

// printVCs writes one row per VC, then each VC's tables (its virtual
// cells), every field as the API names it.
func printVCs(out io.Writer, vcs []object) {
	if len(vcs) == 0 {
		fmt.Fprintln(out, "no virtual clusters: the planner runs without -vc-config (one queue over the whole cluster)")
		return
	}
	printObjects(out, vcs)
	for _, vc := range vcs {
		name := "?"
		if v, ok := vc.get("name"); ok {
			name = cell(v)
		}
		for i, k := range vc.keys {
			if !isTable(vc.vals[i]) {
				continue
			}
			rows, err := decodeObjects(vc.vals[i])
			if err != nil {
				continue
			}
			fmt.Fprintf(out, "\n%s: %s\n", name, strings.ReplaceAll(k, "_", " "))
			printObjects(out, rows)
		}
	}
}

// vcsFromConsul is what the lease keys say of each VC: the jobs holding
// GPUs in it and their virtual cells.
func vcsFromConsul(ctx context.Context, store *consul.Store, warn func(string)) (vcsDoc, error) {
	ls, err := leasesFromConsul(ctx, store, warn)
	if err != nil {
		return vcsDoc{}, err
	}
	type vc struct {
		Name  string   `json:"name"`
		Used  int      `json:"used"`
		Jobs  []string `json:"jobs"`
		Cells []string `json:"cells_used"`
	}
	var out []*vc
	for _, l := range ls.Leases {
		if l.VC == "" {
			continue
		}
		i := slices.IndexFunc(out, func(v *vc) bool { return v.Name == l.VC })
		if i < 0 {
			out = append(out, &vc{Name: l.VC})
			i = len(out) - 1
		}
		out[i].Used += len(l.GPUs)
		out[i].Jobs = append(out[i].Jobs, l.Job)
		out[i].Cells = append(out[i].Cells, l.Cells...)
	}
	slices.SortFunc(out, func(a, b *vc) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.Marshal(out)
	if out == nil {
		b = []byte("[]")
	}
	return vcsDoc{VCs: b}, err
}

// showBindings prints who may use each virtual cluster of cfg: one row per
// VC and namespace binding ("*": every other namespace; a VC without
// bindings is closed: no namespace may use it).
func showBindings(out io.Writer, cfg *hived.Config) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VC\tCELLS\tPOLICY\tNAMESPACE\tMAX PRIORITY\tCLASSES\tOPPORTUNISTIC\tTRUST PROGRESS")
	row := func(vc, cells, policy string, bs []hived.Binding) {
		if len(bs) == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\tnone: closed (no namespace block; namespace \"*\" {} opens it)\t-\t-\t-\t-\n", safe(vc), safe(cells), safe(policy))
			return
		}
		for _, b := range bs {
			classes := "any"
			if b.Classes != nil {
				classes = strings.Join(b.Classes, ",")
				if classes == "" {
					classes = "none"
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", safe(vc), safe(cells), safe(policy), safe(b.Namespace), b.MaxPriority, safe(classes),
				yesNo(b.Opportunistic), yesNo(b.TrustProgress))
		}
	}
	if len(cfg.VCs) == 0 {
		row("(default)", "the whole cluster", "the stack's", cfg.Namespaces)
	}
	for _, v := range cfg.VCs {
		var cells []string
		for _, cc := range v.Cells {
			cells = append(cells, fmt.Sprintf("%d x %s", cc.Count, cc.Type))
		}
		cells = append(cells, v.Pin...)
		policy := v.Policy
		if policy == "" {
			policy = "the stack's"
		}
		row(v.Name, strings.Join(cells, ", "), policy, v.Namespaces)
	}
	w.Flush()
}

var _ cli.Command = (*vcsCommand)(nil)
