package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/themis-nomad/themis/planner/sim"
)

// longRun is a run with many jobs and utilization samples, enough to make
// the plots downsample.
func longRun(policy string, wall float64) sim.Result {
	r := sim.Result{
		Policy: policy, Trace: "synthetic", Cluster: "c16", Seed: 7, TotalGPUs: 16,
		Settings: []string{"rho=0.8", "lease=600"}, WallSeconds: wall,
	}
	for i := range 5000 {
		t := float64(i * 7)
		r.Jobs = append(r.Jobs, finished(
			"job-"+string(rune('a'+i%26)), 1+i%16, t, float64(i%97), float64(60+(i*31)%7200)))
		r.Util = append(r.Util, sim.UtilSample{T: t, Busy: (i * 13) % 17}, sim.UtilSample{T: t + 3, Busy: i % 16})
	}
	r.Makespan = 5000*7 + 7200
	r.Jobs = append(r.Jobs, sim.JobResult{ID: "never", GPUs: 4, Submit: 10, Duration: 100, Queue: 42207})
	return r
}

// readDir maps each file under dir (relative path) to its contents.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// wallLine matches the lines that carry the simulator's wall time.
var wallLine = regexp.MustCompile(`(?m)^.*[Ww]all.*$`)

func TestWriteRunDeterministic(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	if err := WriteRun(a, longRun("fifo", 1.5)); err != nil {
		t.Fatal(err)
	}
	if err := WriteRun(b, longRun("fifo", 1.5)); err != nil {
		t.Fatal(err)
	}
	if err := WriteRun(c, longRun("fifo", 99)); err != nil {
		t.Fatal(err)
	}
	fa, fb, fc := readDir(t, a), readDir(t, b), readDir(t, c)
	want := []string{SummaryFile, JobsFile, AppsFile, ReportFile, JCTCDFFile, QueueCDFFile, UtilizationFile}
	if len(fa) != len(want) {
		t.Errorf("wrote %d files, want %v", len(fa), want)
	}
	for _, name := range want {
		if len(fa[name]) == 0 {
			t.Errorf("%s missing or empty", name)
		}
		if !bytes.Equal(fa[name], fb[name]) {
			t.Errorf("%s differs between two writes of the same run", name)
		}
		ma, mc := wallLine.ReplaceAll(fa[name], nil), wallLine.ReplaceAll(fc[name], nil)
		if !bytes.Equal(ma, mc) {
			t.Errorf("%s differs between runs that differ only in wall time", name)
		}
	}
	if bytes.Equal(fa[SummaryFile], fc[SummaryFile]) {
		t.Error("wall_s did not reach summary.json")
	}
}

func TestWriteRunEmptyAndUnfinished(t *testing.T) {
	tests := []struct {
		name string
		r    sim.Result
	}{
		{"zero Result", sim.Result{}},
		{"no finished jobs", sim.Result{
			Policy: "p", TotalGPUs: 4, Makespan: 50,
			Jobs: []sim.JobResult{{ID: "a", GPUs: 2, Started: true, Start: 3, Queue: 3}},
			Util: []sim.UtilSample{{T: 3, Busy: 2}},
		}},
		{"one finished job, zero makespan", sim.Result{
			Policy: "p", TotalGPUs: 1, Jobs: []sim.JobResult{finished("a", 1, 0, 0, 0)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteRun(dir, tc.r); err != nil {
				t.Fatal(err)
			}
			files := readDir(t, dir)
			js := files[SummaryFile]
			if bytes.Contains(js, []byte("NaN")) || bytes.Contains(js, []byte("Inf")) {
				t.Errorf("summary.json has a non-number:\n%s", js)
			}
			var s Summary
			if err := json.Unmarshal(js, &s); err != nil {
				t.Errorf("summary.json does not parse back: %v", err)
			}
			for name, b := range files {
				if strings.HasSuffix(name, ".svg") {
					checkSVG(t, name, b)
				}
			}
		})
	}
}

// checkSVG fails unless b is well-formed XML with an <svg> root.
func checkSVG(t *testing.T, name string, b []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Errorf("%s is not valid XML: %v", name, err)
			return
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", name, root)
	}
}

func TestPlotsAreSVG(t *testing.T) {
	dir := t.TempDir()
	if err := WriteComparison(dir, twoPolicies(), "fifo"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, b := range readDir(t, dir) {
		if strings.HasSuffix(name, ".svg") {
			checkSVG(t, name, b)
			n++
		}
	}
	if n != 4+2*3 {
		t.Errorf("found %d SVG files, want 10 (4 overlays + 3 per policy)", n)
	}
	if err := checkSVGBytes([]byte("<svg><g></svg>")); err == nil {
		t.Error("the SVG check accepts malformed XML")
	}
}

// checkSVGBytes is checkSVG's parse as an error, to show that it can fail.
func checkSVGBytes(b []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func TestJobsCSV(t *testing.T) {
	jobs := []sim.JobResult{
		{ID: `a,b`, VC: `quote"d`, Model: "multi\nline", GPUs: 2, Submit: 1.23456,
			Start: 2, End: 12.5, Duration: 10, Queue: 1, Preemptions: 1, Started: true, Finished: true, Class: "te"},
		{ID: "waiting", VC: "vc", Model: "bert", GPUs: 8, Submit: 5, Duration: 100, Queue: 95},
		{ID: "running", VC: "vc", Model: "bert", GPUs: 8, Submit: 5, Start: 7, Duration: 100, Queue: 2, Started: true},
	}
	b, err := jobsCSV(jobs)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("jobs.csv does not parse: %v\n%s", err, b)
	}
	want := [][]string{
		jobsHeader,
		{`a,b`, `quote"d`, "multi\nline", "2", "1.235", "2", "12.5", "10", "11.265", "1", "1", "true", "te", "1.1"},
		{"waiting", "vc", "bert", "8", "5", "", "", "100", "", "95", "0", "false", "", ""},
		{"running", "vc", "bert", "8", "5", "7", "", "100", "", "2", "0", "false", "", ""},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("jobs.csv rows\n got %q\nwant %q", rows, want)
	}
	if !bytes.Contains(b, []byte(`"a,b","quote""d"`)) {
		t.Errorf("fields with commas and quotes are not quoted:\n%s", b)
	}
}

func TestDownsampling(t *testing.T) {
	r := longRun("fifo", 0)
	jct, _ := finishedJobs(r.Jobs)
	cdf := cdfPoints(jct)
	if len(cdf) > maxPlotPoints {
		t.Errorf("CDF of %d jobs has %d points, want <= %d", len(jct), len(cdf), maxPlotPoints)
	}
	if last := cdf[len(cdf)-1]; last.Y != 1 || last.X != sortedCopy(jct)[len(jct)-1] {
		t.Errorf("CDF ends at %+v, want (max JCT, 1)", last)
	}
	pts := utilPoints(r.Util, r.Makespan)
	if len(pts) > maxPlotPoints+1 {
		t.Errorf("utilization of %d samples has %d points, want <= %d", len(r.Util), len(pts), maxPlotPoints+1)
	}
	// The window means keep the area under the curve: busy GPU-seconds.
	area := 0.0
	for i := 0; i+1 < len(pts); i++ {
		area += pts[i].Y * (pts[i+1].X - pts[i].X)
	}
	if want := busyGPUSeconds(r.Util, r.Makespan); area < want*(1-1e-9) || area > want*(1+1e-9) {
		t.Errorf("downsampled area %v, want %v", area, want)
	}
	// Short inputs are plotted exactly.
	if got := cdfPoints([]float64{3, 1, 2}); !reflect.DeepEqual(got[1:], cdfPointsWant) {
		t.Errorf("small CDF = %v", got)
	}
}

var cdfPointsWant = plotter.XYs{{X: 1, Y: 1.0 / 3}, {X: 2, Y: 2.0 / 3}, {X: 3, Y: 1}}

func TestWriteComparison(t *testing.T) {
	dir := t.TempDir()
	rs := twoPolicies()
	if err := WriteComparison(dir, rs, "fifo"); err != nil {
		t.Fatal(err)
	}
	files := readDir(t, dir)
	for _, name := range []string{
		ComparisonJSONFile, ComparisonFile, JCTCDFFile, QueueCDFFile,
		"fifo/" + SummaryFile, "tiresias/" + ReportFile, "tiresias/" + UtilizationFile,
	} {
		if len(files[name]) == 0 {
			t.Errorf("%s missing or empty", name)
		}
	}
	var c Comparison
	if err := json.Unmarshal(files[ComparisonJSONFile], &c); err != nil {
		t.Fatalf("comparison.json does not parse back: %v", err)
	}
	if c.Reference != "fifo" || len(c.Policies) != 2 || !same(c.Policies[1].Bins[0].AvgJCTFactor, 2) {
		t.Errorf("comparison.json read back as %+v", c)
	}
	if bytes.Contains(files[ComparisonJSONFile], []byte("NaN")) {
		t.Error("comparison.json has NaN")
	}
	md := string(files[ComparisonFile])
	for _, want := range []string{"| tiresias |", "2×", "Bin1 SS", "[tiresias](tiresias/report.md)", "n/a"} {
		if !strings.Contains(md, want) {
			t.Errorf("comparison.md lacks %q:\n%s", want, md)
		}
	}
	// Determinism: a second write is byte-identical apart from wall time.
	dir2 := t.TempDir()
	rs[0].WallSeconds, rs[1].WallSeconds = 123, 456
	if err := WriteComparison(dir2, rs, "fifo"); err != nil {
		t.Fatal(err)
	}
	for name, b := range readDir(t, dir2) {
		if !bytes.Equal(wallLine.ReplaceAll(b, nil), wallLine.ReplaceAll(files[name], nil)) {
			t.Errorf("%s differs between two writes", name)
		}
	}
}

func TestMarkdownEscaping(t *testing.T) {
	r := sim.Result{Policy: "a|b", Trace: "x\ny", Settings: []string{"k=`v|w`"}}
	md := string(runMarkdown(Summarize(r)))
	for _, want := range []string{`a\|b`, "x y", "`` k=`v\\|w` ``"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}
