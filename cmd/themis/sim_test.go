package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
)

// sixtyJobs finds tiresias-60job.csv in a shared/traces folder above the
// package, or skips.
func sixtyJobs(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for range 5 {
		for _, p := range []string{filepath.Join(dir, "shared", "traces", "tiresias-60job.csv"), filepath.Join(dir, "..", "shared", "traces", "tiresias-60job.csv")} {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		dir = filepath.Dir(dir)
	}
	t.Skip("tiresias-60job.csv not found")
	return ""
}

// TestSimKnobs runs themis sim end to end with knobs: a policy's own knob,
// a knob of one policy of a comparison, a sweep; misspelt knobs (set or
// swept) are errors naming them.
func TestSimKnobs(t *testing.T) {
	tr := sixtyJobs(t)
	gittins := filepath.Join(filepath.Dir(tr), "yarn-gput1000.csv")
	for _, tc := range []struct {
		name string
		args []string
		err  string // "" for success
		want string // a file the run writes
	}{
		{"own knob", []string{"--policy", "tiresias-gittins", "--set", "tiresias.gittins_dist=" + gittins}, "", "summary.json"},
		{"one policy's knob in a comparison", []string{"--policy", "fifo,tiresias-las", "--set", "tiresias.queues=1000s"}, "", "comparison.md"},
		{"sweep", []string{"--policy", "tiresias-las", "--sweep", "tiresias.promote_knob=1,inf"}, "", "tiresias-las[tiresias.promote_knob=inf]/summary.json"},
		{"misspelt knob", []string{"--policy", "fifo", "--set", "tiresias.qeueus=1"}, "tiresias.qeueus", ""},
		{"misspelt swept knob", []string{"--policy", "tiresias-las", "--sweep", "tiresias.promote_knb=1,2"}, "tiresias.promote_knb", ""},
		{"bad sweep", []string{"--policy", "fifo", "--sweep", "nothing"}, "KNOB=V1,V2", ""},
		{"trace and workload", []string{"--policy", "fifo", "--workload", "fitgpp"}, "one of --trace and --workload", ""},
		{"periodic checkpoints, swept victims", []string{"--policy", "tiresias-las", "--set", "sim.checkpoint_every=10m", "--sweep", "preempt.victims=policy,least-lost-work"}, "",
			"tiresias-las[preempt.victims=least-lost-work]/summary.json"},
		{"bad checkpoint period", []string{"--policy", "las", "--set", "sim.checkpoint_every=-1"}, `sim.checkpoint_every = "-1"`, ""},
		{"bad victim order", []string{"--policy", "las", "--sweep", "preempt.victims=policy,fewest"}, `preempt.victims = "fewest"`, ""},
		{"misspelt victims knob", []string{"--policy", "las", "--set", "preempt.victim=least-lost-work"}, "preempt.victim", ""},
		{"peer semantics", []string{"--policy", "fifo,srsf,tiresias-las,tiresias-gittins", "--set", "sim.semantics=tiresias", "--set", "tiresias.gittins_dist=" + gittins}, "", "dlas-gpu-gittins/summary.json"},
		{"peer semantics, yarn", []string{"--policy", "fifo,srtf", "--set", "sim.semantics=tiresias", "--set", "sim.scheme=yarn"}, "", "shortest/summary.json"},
		{"peer semantics with costs", []string{"--policy", "fifo", "--set", "sim.semantics=tiresias", "--set", "sim.restore_s=5"}, "preempts for free", ""},
		{"peer semantics, unknown policy", []string{"--policy", "las", "--set", "sim.semantics=tiresias"}, "no peer-semantics version", ""},
		{"bad semantics", []string{"--policy", "fifo", "--set", "sim.semantics=peer"}, "sim.semantics", ""},
		{"bad scheme", []string{"--policy", "fifo", "--set", "sim.semantics=tiresias", "--set", "sim.scheme=random"}, "sim.scheme", ""},
		{"bad order", []string{"--policy", "tiresias-las", "--set", "tiresias.order=fifo"}, "tiresias.order", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			o := simOptions{trace: tr, cluster: "n2g4", out: out, seed: 1, quiet: true, vcMode: "hived"}
			fs := simFlags(&o)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.trace, o.out, o.quiet = tr, out, true
			err := (&simCommand{ui: cli.NewMockUi()}).run(o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(out, tc.want)); err != nil {
				t.Errorf("%s not written: %v", tc.want, err)
			}
		})
	}
}

// TestSimThemis runs Figure 18's experiment end to end: the themis policy
// beside a baseline, its knobs swept and set, and the fairness fields in
// summary.json.
func TestSimThemis(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    simOptions
		want string
	}{
		{"comparison", simOptions{workload: "themis-fig18", cluster: "themis-fig18", policy: "themis,las",
			sets: stringList{"themis.lease=5m", "workload.fig18_jobs=2"}}, "themis/summary.json"},
		{"lie sweep", simOptions{workload: "themis-fig18", cluster: "themis-fig18", policy: "themis",
			sweep: stringList{"themis.lie=app-0001:0%,app-0001:+50%"}, sets: stringList{"workload.fig18_duration=30m"}},
			"themis[themis.lie=app-0001:+50%]/apps.csv"},
		{"workload sweep", simOptions{workload: "themis-fig18", cluster: "themis-fig18", policy: "themis,las",
			sweep: stringList{"workload.fig18_duration=10m,20m", "sim.realloc=instant,10m"}, sets: stringList{"workload.fig18_jobs=2"}},
			"sweep.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.out, o.seed, o.quiet = t.TempDir(), 1, true
			if err := (&simCommand{ui: cli.NewMockUi()}).run(o); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(o.out, tc.want)); err != nil {
				t.Fatalf("%s not written: %v", tc.want, err)
			}
			if tc.name == "workload sweep" {
				b, err := os.ReadFile(filepath.Join(o.out, "sweep.md"))
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{`las\[sim.realloc=10m\] | workload.fig18\_duration=20m`, "rho_cdf_2.svg", "| 0 |"} {
					if !strings.Contains(string(b), k) {
						t.Errorf("sweep.md lacks %s:\n%s", k, b)
					}
				}
				// One comparison per generated trace, with floors (apps.csv).
				csv, err := filepath.Glob(filepath.Join(o.out, "*20m*", `las\[*10m*`, "apps.csv"))
				if err != nil || len(csv) != 1 {
					t.Fatalf("apps.csv of las under the 20-minute trace: %v %v", csv, err)
				}
				if b, _ := os.ReadFile(csv[0]); !strings.Contains(strings.SplitN(string(b), "\n", 2)[0], "floor") {
					t.Errorf("apps.csv header lacks floor: %s", b)
				}
			}
			if tc.name == "comparison" {
				b, err := os.ReadFile(filepath.Join(o.out, "themis", "summary.json"))
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{`"apps": 8`, `"apps_finished": 8`, `"max_rho"`, `"frac_rho_le_1"`, `"avg_placement_score"`} {
					if !strings.Contains(string(b), k) {
						t.Errorf("summary.json lacks %s", k)
					}
				}
			}
		})
	}
	for _, tc := range []struct{ set, want string }{
		{"themis.lie=nobody", "themis.lie"},
		{"themis.lie=app-0001:inf%", "themis.lie"},
		{"workload.fig18_jobs=99999999", "want 1 to 65536 jobs"},
		{"workload.fig18_duration=-1h", "positive finite duration"},
	} {
		bad := simOptions{workload: "themis-fig18", cluster: "themis-fig18", policy: "themis", out: t.TempDir(), quiet: true,
			sets: stringList{tc.set}}
		if err := (&simCommand{ui: cli.NewMockUi()}).run(bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one saying %q", tc.set, err, tc.want)
		}
	}
}

func TestArrivalScale(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64 // 0: an error
	}{{"0.25", 0.25}, {" 4 ", 4}, {"0", 0}, {"-1", 0}, {"inf", 0}, {"NaN", 0}, {"x", 0}, {"1e400", 0}} {
		x, err := arrivalScale(tc.in)
		if tc.want == 0 {
			if err == nil || !strings.Contains(err.Error(), "workload.arrival_scale") {
				t.Errorf("%q: %v, %v; want an error naming the knob", tc.in, x, err)
			}
		} else if err != nil || x != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.in, x, err, tc.want)
		}
	}
}

// TestVCPoliciesSimAndPlanner: `themis sim` runs the example per-VC-policy
// config on the dev cluster, and a policy or knob is refused by `themis
// sim` and `themis planner` with the same message, whether it is set on the
// command line or in the VC config.
func TestVCPoliciesSimAndPlanner(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "vcs", "two-policies.hcl")
	o := simOptions{workload: "fitgpp", cluster: filepath.Join("..", "..", "examples", "topology", "dev-cluster.hcl"), vcConfig: example,
		vcMode: "hived", policy: "fifo", out: t.TempDir(), seed: 1, quiet: true,
		sets: stringList{"workload.vcs=trial,research", "workload.nodes=3", "workload.jobs=200"}}
	if err := (&simCommand{ui: cli.NewMockUi()}).run(o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(o.out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fifo+research=tiresias-las+trial=fitgpp", "| trial | 8 | 100 | 100 / 100 |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if _, err := policyByName("fifo", nil, example); err != nil {
		t.Errorf("themis planner refuses the example: %v", err)
	}

	dir := t.TempDir()
	for _, tc := range []struct {
		name, vc string
		sets     []string
		want     string
	}{
		{"misspelt knob", "", []string{"tiresias.queus=1h"}, "unknown setting(s) tiresias.queus"},
		{"VC policy allocates", `policy = "themis"`, nil, `bad.hcl:2,10: vc "a": policy "themis" allocates GPUs itself`},
		{"VC knob misspelt", `policy = "fitgpp"` + "\n" + `knobs = { "fitgpp.ss" = 1 }`, nil,
			`bad.hcl:3,9: vc "a": policy "fitgpp": unknown setting(s) fitgpp.ss (did you mean fitgpp.s?)`},
		{"VC knob of another policy", `policy = "fitgpp"` + "\n" + `knobs = { "tiresias.queues" = "1h" }`, nil,
			`bad.hcl:3,9: vc "a": knobs: unknown setting(s) tiresias.queues (policy "fitgpp" reads no such knob)`},
		{"VC policy unknown", `policy = "fit-gpp"`, nil, `bad.hcl:2,10: vc "a": policy "fit-gpp": unknown`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "bad.hcl")
			src := "vc \"a\" {\n" + tc.vc + "\ncells {\n  type = \"node8\"\n  count = 1\n}\n}\n"
			if tc.vc == "" {
				src = "vc \"a\" {\ncells {\n  type = \"node8\"\n  count = 1\n}\n}\n"
			}
			if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			so := o
			so.vcConfig, so.out, so.sets = cfg, t.TempDir(), append(stringList{"workload.vcs=a", "workload.jobs=10"}, tc.sets...)
			simErr := (&simCommand{ui: cli.NewMockUi()}).run(so)
			_, liveErr := policyByName("fifo", tc.sets, cfg)
			for what, err := range map[string]error{"sim": simErr, "planner": liveErr} {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v, want one containing %q", what, err, tc.want)
				}
			}
		})
	}
}
