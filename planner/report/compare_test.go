package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/sim"
)

// twoPolicies is one trace run by a slow reference and a policy that halves
// the JCT of small-short jobs only.
func twoPolicies() []sim.Result {
	const h = 3600.0
	ref := sim.Result{
		Policy: "fifo", Trace: "philly", Cluster: "c64", TotalGPUs: 64, Makespan: 20 * h,
		Preemptions: 0,
		Jobs: []sim.JobResult{
			finished("ss", 8, 0, 100, 100),         // small (8 <= 8), short: JCT 200
			finished("sl", 1, 0, 0, 4*h),           // small, long (4 h is not < 4 h): JCT 4 h
			finished("ls", 16, 0, 1000, 1000),      // large, short: JCT 2000
			finished("ll", 32, 0, 2*h, 10*h),       // large, long: JCT 12 h
			{ID: "ll2", GPUs: 64, Duration: 5 * h}, // large, long, unfinished
		},
	}
	tiresias := ref
	tiresias.Policy = "tiresias"
	tiresias.Makespan = 16 * h
	tiresias.Preemptions = 4
	tiresias.Jobs = append([]sim.JobResult(nil), ref.Jobs...)
	tiresias.Jobs[0] = finished("ss", 8, 0, 0, 100) // JCT 100
	return []sim.Result{ref, tiresias}
}

func TestCompare(t *testing.T) {
	const h = 3600.0
	c, err := Compare(twoPolicies(), "fifo", TiresiasBinning)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Policies) != 2 || c.Policies[0].Policy != "fifo" || c.Policies[1].Policy != "tiresias" {
		t.Fatalf("policies out of order: %+v", c.Policies)
	}
	refAvg := (200 + 4*h + 2000 + 12*h) / 4
	tirAvg := (100 + 4*h + 2000 + 12*h) / 4
	tests := []struct {
		name      string
		got, want Num
	}{
		{"fifo avg JCT", c.Policies[0].Metrics.AvgJCT, Num(refAvg)},
		{"fifo factor is 1", c.Policies[0].Factors.AvgJCT, 1},
		{"fifo preemption factor 0/0", c.Policies[0].Factors.Preemptions, 1},
		{"tiresias avg JCT factor", c.Policies[1].Factors.AvgJCT, Num(refAvg / tirAvg)},
		// Nearest-rank median of 4 is the 2nd: 2000 for both.
		{"tiresias median factor", c.Policies[1].Factors.MedianJCT, 1},
		{"tiresias makespan factor", c.Policies[1].Factors.Makespan, 20.0 / 16},
		{"tiresias avg queue factor", c.Policies[1].Factors.AvgQueue, Num((100 + 1000 + 2*h) / (1000 + 2*h))},
		{"tiresias preemption factor 0/4", c.Policies[1].Factors.Preemptions, 0},
		{"SS avg JCT", c.Policies[1].Bins[0].AvgJCT, 100},
		{"SS factor", c.Policies[1].Bins[0].AvgJCTFactor, 2},
		{"SS queue factor: 100/0", c.Policies[1].Bins[0].AvgQueueFactor, nan},
		{"SL avg JCT", c.Policies[1].Bins[1].AvgJCT, 4 * h},
		{"LS factor", c.Policies[1].Bins[2].AvgJCTFactor, 1},
		{"LL avg JCT over finished only", c.Policies[0].Bins[3].AvgJCT, 12 * h},
	}
	for _, tc := range tests {
		if !same(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	wantBins := []struct {
		bin            string
		jobs, finished int
	}{{"SS", 1, 1}, {"SL", 1, 1}, {"LS", 1, 1}, {"LL", 2, 1}}
	for k, w := range wantBins {
		b := c.Policies[0].Bins[k]
		if b.Bin != w.bin || b.Jobs != w.jobs || b.Finished != w.finished {
			t.Errorf("bin %d = %s %d/%d, want %s %d/%d", k, b.Bin, b.Finished, b.Jobs, w.bin, w.finished, w.jobs)
		}
	}
}

func TestBinningThresholds(t *testing.T) {
	tests := []struct {
		gpus     int
		duration float64
		b        Binning
		want     string
	}{
		{8, 4*3600 - 1, TiresiasBinning, "SS"},
		{8, 4 * 3600, TiresiasBinning, "SL"},
		{9, 0, TiresiasBinning, "LS"},
		{9, 1e9, TiresiasBinning, "LL"},
		{4, 799, TiresiasTestbedBinning, "SS"},
		{5, 800, TiresiasTestbedBinning, "LL"},
	}
	for _, tc := range tests {
		got := binNames[tc.b.bin(sim.JobResult{GPUs: tc.gpus, Duration: tc.duration})]
		if got != tc.want {
			t.Errorf("bin(%d GPUs, %v s) under %+v = %s, want %s", tc.gpus, tc.duration, tc.b, got, tc.want)
		}
	}
}

func TestCompareRejects(t *testing.T) {
	rs := twoPolicies()
	other := rs[1]
	other.Trace = "helios"
	dup := rs[1]
	dup.Policy = "fifo"
	slash := rs[1]
	slash.Policy = "a/b"
	dots := rs[1]
	dots.Policy = ".."
	empty := rs[1]
	empty.Policy = ""
	clash := rs[1]
	clash.Policy = ComparisonFile
	tests := []struct {
		name    string
		results []sim.Result
		ref     string
		wantErr string
	}{
		{"no results", nil, "fifo", "no results"},
		{"unknown reference", rs, "srtf", `"srtf" is not among`},
		{"different trace", []sim.Result{rs[0], other}, "fifo", `trace "helios"`},
		{"duplicate policy", []sim.Result{rs[0], dup}, "fifo", "appears twice"},
		{"slash in name", []sim.Result{rs[0], slash}, "fifo", "cannot name a directory"},
		{"dot-dot name", []sim.Result{rs[0], dots}, "fifo", "cannot name a directory"},
		{"empty name", []sim.Result{rs[0], empty}, "fifo", "empty policy name"},
		{"name of a comparison file", []sim.Result{rs[0], clash}, "fifo", "collides"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compare(tc.results, tc.ref, TiresiasBinning)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Compare error = %v, want one containing %q", err, tc.wantErr)
			}
			if err := WriteComparison(t.TempDir(), tc.results, tc.ref); err == nil {
				t.Error("WriteComparison accepted what Compare rejects")
			}
		})
	}
}

// TestCompareClasses: with TE jobs in the runs, the comparison has FitGpp's
// per-class metrics and their change against the reference, in the JSON,
// the Markdown and a slowdown plot.
func TestCompareClasses(t *testing.T) {
	class := func(j sim.JobResult, c string, preempted int) sim.JobResult {
		j.Class, j.Preemptions = c, preempted
		return j
	}
	ref := sim.Result{Policy: "fifo", Trace: "w", Cluster: "c", TotalGPUs: 8, Makespan: 100, Jobs: []sim.JobResult{
		class(finished("te1", 1, 0, 90, 10), "te", 0),  // slowdown 10
		class(finished("be1", 4, 0, 10, 100), "be", 0), // 1.1
	}}
	fit := ref
	fit.Policy = "fitgpp"
	fit.Restarts = []float64{40}
	fit.Jobs = []sim.JobResult{
		class(finished("te1", 1, 0, 0, 10), "te", 0),   // 1: a 90% cut
		class(finished("be1", 4, 0, 32, 100), "be", 1), // 1.32: a 20% rise
	}
	c, err := Compare([]sim.Result{ref, fit}, "fifo", TiresiasBinning)
	if err != nil {
		t.Fatal(err)
	}
	k := c.Policies[1].Classes
	if k == nil {
		t.Fatal("no class metrics")
	}
	for _, tc := range []struct {
		name      string
		got, want Num
	}{
		{"TE p95", k.TEP95Slowdown, 1},
		{"TE p95 change", k.TEP95Change, -0.9},
		{"BE median change", k.BEMedianChange, 0.2},
		{"restart median", k.MedianRestart, 40},
	} {
		if !same(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if k.PreemptedJobs != 1 {
		t.Errorf("preempted jobs %d, want 1", k.PreemptedJobs)
	}
	dir := t.TempDir()
	if err := WriteComparison(dir, []sim.Result{ref, fit}, "fifo"); err != nil {
		t.Fatal(err)
	}
	md := readFile(t, dir, ComparisonFile)
	for _, want := range []string{"## Job classes (FitGpp)", "| fitgpp | 1 | 1 | -90.0% |", "+20.0%", SlowdownCDFFile} {
		if !strings.Contains(md, want) {
			t.Errorf("comparison.md lacks %q:\n%s", want, md)
		}
	}
	if svg := readFile(t, dir, SlowdownCDFFile); !strings.Contains(svg, "<svg") {
		t.Errorf("%s is not an SVG", SlowdownCDFFile)
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
