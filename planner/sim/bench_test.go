package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/trace"
	"github.com/themis-nomad/themis/planner/workload"
)

// sharedTrace finds a trace in ../shared/traces beside the repository.
func sharedTrace(tb testing.TB, name string) *trace.Trace {
	tb.Helper()
	tr, err := trace.Load(sharedPath(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}

// sharedPath finds a file in a shared/traces folder above the test's
// directory or beside one of them, or skips the test.
func sharedPath(tb testing.TB, name string) string {
	tb.Helper()
	dir, _ := os.Getwd()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		for _, p := range []string{filepath.Join(d, "shared", "traces", name), filepath.Join(filepath.Dir(d), "shared", "traces", name)} {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	tb.Skipf("trace %s not found in a shared/traces folder above %s", name, dir)
	return ""
}

// BenchmarkPhilly simulates the first 20,000 jobs of philly.csv under
// tiresias-las on the philly preset (480 GPUs); ns/op is one run. The full-trace
// figure comes from `themis sim` (docs/simulator.md).
func BenchmarkPhilly(b *testing.B) {
	tr := sharedTrace(b, "philly.csv")
	tr.Jobs = tr.Jobs[:20000]
	cl, err := cluster.Preset("philly")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		pol, _ := core.NewPolicy("tiresias-las", core.Knobs{})
		if _, err := Run(Config{Trace: tr, Cluster: cl, Policy: pol, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkThemisW2 simulates the Themis paper's Workload 2 (built from
// philly.csv, 31,659 jobs) under themis on the themis preset (256 GPUs);
// ns/op is one run.
func BenchmarkThemisW2(b *testing.B) {
	tr, err := workload.ThemisW2(sharedTrace(b, "philly.csv"), workload.DefaultThemisConfig())
	if err != nil {
		b.Fatal(err)
	}
	cl, err := cluster.Preset("themis")
	if err != nil {
		b.Fatal(err)
	}
	ckpt, restore, err := Costs(core.Knobs{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if _, err := Run(Config{Trace: tr, Cluster: cl, Policy: themisPolicy(b), Seed: 1, CheckpointCost: ckpt, RestoreCost: restore}); err != nil {
			b.Fatal(err)
		}
	}
}
