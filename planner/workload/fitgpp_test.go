package workload

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/trace"
)

func config(jobs int, seed uint64, arrivals string) FitGppConfig {
	cfg := DefaultFitGppConfig()
	cfg.Jobs, cfg.Seed, cfg.Arrivals = jobs, seed, arrivals
	return cfg
}

func mustFitGpp(t testing.TB, cfg FitGppConfig) *trace.Trace {
	t.Helper()
	tr, err := FitGpp(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestFitGppDeterministic(t *testing.T) {
	for _, arrivals := range []string{ArrivalsFIFO, ArrivalsPoisson} {
		t.Run(arrivals, func(t *testing.T) {
			a := mustFitGpp(t, config(4096, 42, arrivals))
			b := mustFitGpp(t, config(4096, 42, arrivals))
			if !reflect.DeepEqual(a, b) {
				t.Fatal("the same config gave two different traces")
			}
			c := mustFitGpp(t, config(4096, 43, arrivals))
			same := 0
			for i := range a.Jobs {
				if a.Jobs[i].Duration == c.Jobs[i].Duration {
					same++
				}
			}
			if same > 0 {
				t.Errorf("seeds 42 and 43 gave %d of %d jobs the same execution time", same, len(a.Jobs))
			}
		})
	}
}

// Each attribute has its own stream: changing the grace periods or the
// arrival process changes no other attribute.
func TestFitGppStreamsIndependent(t *testing.T) {
	base := config(2048, 7, ArrivalsFIFO)
	other := base
	other.GracePeriod.Mean = 600
	other.Arrivals = ArrivalsPoisson
	a, b := mustFitGpp(t, base), mustFitGpp(t, other)
	for i := range a.Jobs {
		x, y := a.Jobs[i], b.Jobs[i]
		if x.Class != y.Class || x.Duration != y.Duration || x.CPUs != y.CPUs || x.MemoryGB != y.MemoryGB || x.GPUs != y.GPUs {
			t.Fatalf("job %d differs beyond grace period and arrival: %+v vs %+v", i, x, y)
		}
		if x.GracePeriod == y.GracePeriod {
			t.Fatalf("job %d: grace period unchanged by a new distribution", i)
		}
	}
}

// checkJobs checks every job's invariants against the config.
func checkJobs(t *testing.T, cfg FitGppConfig, tr *trace.Trace) {
	t.Helper()
	if tr.Format != FormatFitGpp || len(tr.Jobs) != cfg.Jobs || !tr.Start.IsZero() {
		t.Fatalf("trace %q: format %q, %d jobs, start %v", tr.Name, tr.Format, len(tr.Jobs), tr.Start)
	}
	node := cfg.Cluster.Node
	ids := map[string]bool{}
	for i, j := range tr.Jobs {
		params := cfg.BE
		switch j.Class {
		case "te":
			params = cfg.TE
		case "be":
		default:
			t.Fatalf("job %s: class %q", j.ID, j.Class)
		}
		if want := fmt.Sprintf("fitgpp-%06d", i+1); j.ID != want || j.Line != i+2 {
			t.Fatalf("job %d: ID %q line %d, want %q line %d", i, j.ID, j.Line, want, i+2)
		}
		ids[j.ID] = true
		if j.VC != "default" || j.Model != "" || j.Iterations != 0 {
			t.Fatalf("job %s: VC %q model %q iterations %d", j.ID, j.VC, j.Model, j.Iterations)
		}
		if j.GPUs < 1 || j.GPUs > node.GPUs || j.CPUs < 1 || j.CPUs > node.CPUs || j.MemoryGB < 1 || j.MemoryGB > node.MemoryGB {
			t.Fatalf("job %s requests %g CPUs, %g GB, %d GPUs: does not fit a node %+v (or is below 1)", j.ID, j.CPUs, j.MemoryGB, j.GPUs, node)
		}
		if j.CPUs != math.Trunc(j.CPUs) || j.MemoryGB != math.Trunc(j.MemoryGB) {
			t.Fatalf("job %s: %g CPUs, %g GB, want whole numbers", j.ID, j.CPUs, j.MemoryGB)
		}
		if d := params.Duration; j.Duration < d.Lo || j.Duration > d.Hi {
			t.Fatalf("job %s (%s): duration %g outside [%g, %g]", j.ID, j.Class, j.Duration, d.Lo, d.Hi)
		}
		if g := cfg.GracePeriod; j.GracePeriod < g.Lo || j.GracePeriod > g.Hi {
			t.Fatalf("job %s: grace period %g outside [%g, %g]", j.ID, j.GracePeriod, g.Lo, g.Hi)
		}
		if i == 0 && j.Submit != 0 {
			t.Fatalf("first job submitted at %g, want 0", j.Submit)
		}
		if i > 0 && j.Submit < tr.Jobs[i-1].Submit {
			t.Fatalf("job %s submitted at %g, before its predecessor (%g)", j.ID, j.Submit, tr.Jobs[i-1].Submit)
		}
	}
	if len(ids) != len(tr.Jobs) {
		t.Fatalf("%d distinct IDs for %d jobs", len(ids), len(tr.Jobs))
	}
}

// within fails unless got is want ± tol.
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6g, want %.6g ± %.3g", what, got, want, tol)
	}
}

func TestFitGppWorkload(t *testing.T) {
	const n = 1 << 16
	for _, arrivals := range []string{ArrivalsFIFO, ArrivalsPoisson} {
		t.Run(arrivals, func(t *testing.T) {
			cfg := config(n, 2019, arrivals)
			tr := mustFitGpp(t, cfg)
			checkJobs(t, cfg, tr)
			s, err := Describe(tr, cfg.Cluster)
			if err != nil {
				t.Fatal(err)
			}
			// The TE share is binomial: five standard errors.
			p := cfg.TEFraction
			within(t, "TE fraction", s.Classes[0].Fraction, p, 5*math.Sqrt(p*(1-p)/n))
			if s.Classes[0].Class != "te" || s.Classes[1].Class != "be" || len(s.Classes) != 2 {
				t.Fatalf("classes %+v, want te and be", s.Classes)
			}
			// Per-class means against the distributions' own means, to
			// five standard errors.
			te, be, grace, err := cfg.samplers()
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range []classSamplers{te, be} {
				st := s.Classes[i]
				k := float64(st.Jobs)
				se := func(sd float64) float64 { return 5 * sd / math.Sqrt(k) }
				within(t, st.Class+" mean duration", st.MeanDuration, c.duration.Expected(), se(c.duration.StdDev()))
				for _, r := range []struct {
					name string
					got  float64
					w    whole
				}{{"GPUs", st.MeanGPUs, c.gpus}, {"CPUs", st.MeanCPUs, c.cpus}, {"memory", st.MeanMemoryGB, c.mem}} {
					// The whole-number draw's sd is at most the continuous
					// one's plus the rounding's ½.
					within(t, st.Class+" mean "+r.name, r.got, r.w.Expected(), se(r.w.s.StdDev()+0.5))
				}
				within(t, st.Class+" mean grace period", st.MeanGracePeriod, grace.Expected(), se(grace.StdDev()))
			}
			switch arrivals {
			case ArrivalsFIFO:
				// L(t) is kept in [Load, Load + one job's share) after every
				// event, so its time average is too.
				maxShare := 1.0 / float64(cfg.Cluster.Nodes)
				if s.FIFOLoad < cfg.Load || s.FIFOLoad >= cfg.Load+maxShare {
					t.Errorf("FIFO load %.6g, want in [%g, %g)", s.FIFOLoad, cfg.Load, cfg.Load+maxShare)
				}
				// FIFO serves less than the cluster's capacity.
				if s.OfferedLoad >= 1 || s.FIFOUtilization >= 1 || s.OfferedLoad < 0.5 {
					t.Errorf("offered load %.3g, FIFO utilization %.3g: want in [0.5, 1)", s.OfferedLoad, s.FIFOUtilization)
				}
			case ArrivalsPoisson:
				within(t, "offered load", s.OfferedLoad, cfg.Load, 1e-9*cfg.Load)
				if s.Offered.GPUs != s.OfferedLoad {
					t.Errorf("offered load per resource %+v: want the GPUs dominant", s.Offered)
				}
				// Gaps are exponential: their coefficient of variation is 1.
				var sum, sq float64
				for i := 1; i < n; i++ {
					g := tr.Jobs[i].Submit - tr.Jobs[i-1].Submit
					sum += g
					sq += g * g
				}
				mean := sum / (n - 1)
				cv := math.Sqrt(sq/(n-1)-mean*mean) / mean
				within(t, "inter-arrival coefficient of variation", cv, 1, 0.03)
			}
		})
	}
}

// Other targets, TE shares and node shapes.
func TestFitGppTargets(t *testing.T) {
	cases := []struct {
		load, te float64
		cluster  Cluster
		arrivals string
	}{
		{1.0, 0.3, PaperCluster, ArrivalsFIFO},
		{3.5, 0.3, PaperCluster, ArrivalsFIFO},
		{2.0, 0, PaperCluster, ArrivalsFIFO},
		{2.0, 1, PaperCluster, ArrivalsFIFO},
		{0.7, 0.5, PaperCluster, ArrivalsPoisson},
		{2.0, 0.3, Cluster{Nodes: 5, Node: Node{CPUs: 8, MemoryGB: 24.5, GPUs: 2}}, ArrivalsFIFO},
		{1.5, 0.3, Cluster{Nodes: 1, Node: Node{CPUs: 64, MemoryGB: 512, GPUs: 4}}, ArrivalsPoisson},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("load %g te %g %d nodes %s", c.load, c.te, c.cluster.Nodes, c.arrivals), func(t *testing.T) {
			cfg := config(8192, 5, c.arrivals)
			cfg.Load, cfg.TEFraction, cfg.Cluster = c.load, c.te, c.cluster
			for _, p := range []*ClassParams{&cfg.TE, &cfg.BE} {
				p.CPUs.Hi, p.MemoryGB.Hi, p.GPUs.Hi = math.Floor(c.cluster.Node.CPUs), math.Floor(c.cluster.Node.MemoryGB), float64(c.cluster.Node.GPUs)
			}
			tr := mustFitGpp(t, cfg)
			checkJobs(t, cfg, tr)
			s, err := Describe(tr, cfg.Cluster)
			if err != nil {
				t.Fatal(err)
			}
			if c.te == 0 && len(s.Classes) != 1 || c.te == 1 && s.Classes[0].Class != "te" || len(s.Classes) == 1 && s.Classes[0].Jobs != cfg.Jobs {
				t.Errorf("TE share %g gave classes %+v", c.te, s.Classes)
			}
			if c.arrivals == ArrivalsPoisson {
				within(t, "offered load", s.OfferedLoad, c.load, 1e-9*c.load)
				return
			}
			// One job is at most a node: 1/nodes of the cluster.
			if maxShare := 1 / float64(c.cluster.Nodes); s.FIFOLoad < c.load || s.FIFOLoad >= c.load+maxShare {
				t.Errorf("FIFO load %.6g, want in [%g, %g)", s.FIFOLoad, c.load, c.load+maxShare)
			}
		})
	}
}

func TestFitGppSmall(t *testing.T) {
	for _, arrivals := range []string{ArrivalsFIFO, ArrivalsPoisson} {
		tr := mustFitGpp(t, config(1, 1, arrivals))
		if len(tr.Jobs) != 1 || tr.Jobs[0].Submit != 0 || tr.Jobs[0].ID != "fitgpp-000001" {
			t.Errorf("%s: one job: %+v", arrivals, tr.Jobs)
		}
		if _, err := Describe(tr, PaperCluster); err != nil {
			t.Errorf("%s: describe one job: %v", arrivals, err)
		}
	}
	if ids := jobIDs(1_000_000); ids[0] != "fitgpp-0000001" || ids[999_999] != "fitgpp-1000000" {
		t.Errorf("IDs of a million jobs: %q ... %q", ids[0], ids[999_999])
	}
}

func TestFitGppInvalid(t *testing.T) {
	cases := []struct {
		name string
		edit func(*FitGppConfig)
		want string
	}{
		{"no jobs", func(c *FitGppConfig) { c.Jobs = 0 }, "jobs = 0"},
		{"too many jobs", func(c *FitGppConfig) { c.Jobs = MaxJobs + 1 }, "jobs = "},
		{"negative TE share", func(c *FitGppConfig) { c.TEFraction = -0.1 }, "te_fraction = -0.1"},
		{"TE share NaN", func(c *FitGppConfig) { c.TEFraction = math.NaN() }, "te_fraction = NaN"},
		{"zero load", func(c *FitGppConfig) { c.Load = 0 }, "load = 0"},
		{"infinite load", func(c *FitGppConfig) { c.Load = math.Inf(1) }, "load = +Inf"},
		{"unknown arrivals", func(c *FitGppConfig) { c.Arrivals = "" }, `arrivals = ""`},
		{"no nodes", func(c *FitGppConfig) { c.Cluster.Nodes = 0 }, "0 nodes"},
		{"GPU-less node", func(c *FitGppConfig) { c.Cluster.Node.GPUs = 0 }, "node GPUs 0"},
		{"negative duration bound", func(c *FitGppConfig) { c.TE.Duration.Lo = -1 }, "TE jobs: duration"},
		{"bad duration", func(c *FitGppConfig) { c.BE.Duration.SD = -1 }, "BE jobs: duration"},
		{"zero GPUs allowed", func(c *FitGppConfig) { c.BE.GPUs.Lo = 0 }, "BE jobs: GPUs"},
		{"node below the bound", func(c *FitGppConfig) { c.TE.CPUs.Lo = 40 }, "TE jobs: CPUs"},
		{"negative grace", func(c *FitGppConfig) { c.GracePeriod.Lo = -60 }, "grace period"},
		{"zero value", func(c *FitGppConfig) { *c = FitGppConfig{Jobs: 10} }, "load = 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config(10, 1, ArrivalsFIFO)
			c.edit(&cfg)
			_, err := FitGpp(cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestFitGppVCs: workload.vcs puts the jobs in the VCs in turn and changes
// nothing else.
func TestFitGppVCs(t *testing.T) {
	cfg := DefaultFitGppConfig()
	cfg.Jobs = 50
	plain, err := FitGpp(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.VCs = []string{"a", "b", "c"}
	spread, err := FitGpp(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range spread.Jobs {
		k := plain.Jobs[i]
		if want := cfg.VCs[(j.Line-2)%3]; j.VC != want {
			t.Fatalf("job %s (line %d) in VC %q, want %q", j.ID, j.Line, j.VC, want)
		}
		k.VC = j.VC
		if j != k {
			t.Fatalf("job %d: %+v, without VCs %+v", i, j, k)
		}
	}
}
