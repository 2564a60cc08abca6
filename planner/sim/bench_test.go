package sim

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/stack"
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
		pol, _ := stack.NewPolicy("tiresias-las", core.Knobs{})
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

// BenchmarkSlice14 is issue #17's speed bar: the 14-day slice of
// philly.csv (24,134 jobs, as planner/sim/testdata/peer/phillyslice.py
// writes it) under tiresias-las on r1n64g8, as `themis sim --trace
// /tmp/slice14.csv --cluster r1n64g8 --policy tiresias-las` runs it
// (default knobs and costs, the command's GC setting); ns/op is one run,
// avg_jct_s its average JCT.
//
//	go test -run '^$' -bench Slice14 -benchtime 5x ./planner/sim/
func BenchmarkSlice14(b *testing.B) {
	tr := phillySlice(b, time.Date(2017, 10, 1, 0, 0, 0, 0, time.UTC), 14)
	benchCommand(b, tr, "r1n64g8", "tiresias-las")
}

// BenchmarkPhillyFull is the other speed bar: all of philly.csv under
// tiresias-las on the philly preset, as `themis sim` runs it.
func BenchmarkPhillyFull(b *testing.B) {
	benchCommand(b, sharedTrace(b, "philly.csv"), "philly", "tiresias-las")
}

// benchCommand runs policy on tr and cluster as `themis sim` does with
// default knobs.
func benchCommand(b *testing.B, tr *trace.Trace, clusterName, policy string) {
	cl, err := cluster.FromPresetOrFile(clusterName)
	if err != nil {
		b.Fatal(err)
	}
	ckpt, restore, err := Costs(core.Knobs{})
	if err != nil {
		b.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // cmd/themis sim's
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := stack.Build(policy, stack.Options{Knobs: core.Knobs{}})
		if err != nil {
			b.Fatal(err)
		}
		r, err := Run(Config{Trace: tr, Cluster: cl, Policy: st.Policy, Seed: 1, CheckpointCost: ckpt, RestoreCost: restore,
			Victims: st.Victims, VictimTie: st.VictimTie})
		if err != nil {
			b.Fatal(err)
		}
		sum := 0.0
		for _, j := range r.Jobs {
			sum += j.End - j.Submit
		}
		b.ReportMetric(sum/float64(len(r.Jobs)), "avg_jct_s")
	}
}

// phillySlice is phillyslice.py in Go: the jobs of philly.csv submitted in
// the days from start, in the Tiresias simulator's CSV (whole seconds from
// start, durations truncated, model resnet50), parsed as `themis sim
// --trace` parses that file.
func phillySlice(tb testing.TB, start time.Time, days int) *trace.Trace {
	tb.Helper()
	f, err := os.Open(sharedPath(tb, "philly.csv"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatal(err)
	}
	type row struct{ s, d, g int64 }
	var rows []row
	for _, r := range recs[1:] { // timestamp,duration,num_gpus,...
		t, err := time.Parse(time.DateTime, r[0])
		if err != nil {
			tb.Fatal(err)
		}
		d, err1 := strconv.ParseFloat(r[1], 64)
		g, err2 := strconv.ParseInt(r[2], 10, 64)
		if err1 != nil || err2 != nil {
			tb.Fatal(err1, err2)
		}
		if s := int64(t.Sub(start) / time.Second); s >= 0 && s < int64(days)*86400 {
			rows = append(rows, row{s, int64(d), g})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return int(a.s - b.s) })
	var buf bytes.Buffer
	buf.WriteString("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n")
	for i, r := range rows {
		fmt.Fprintf(&buf, "%d,%d,%d,1,resnet50,%d,0\n", i, r.g, r.s, r.d)
	}
	tr, err := trace.Parse(&buf, fmt.Sprintf("slice%d.csv", days))
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}
