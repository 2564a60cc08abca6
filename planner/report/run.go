package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/themis-nomad/themis/planner/sim"
)

// Files WriteRun writes into its directory.
const (
	SummaryFile     = "summary.json"
	JobsFile        = "jobs.csv"
	ReportFile      = "report.md"
	JCTCDFFile      = "jct_cdf.svg"
	QueueCDFFile    = "queue_cdf.svg"
	UtilizationFile = "utilization.svg"
	// SlowdownCDFFile is written by comparisons of runs with TE jobs.
	SlowdownCDFFile = "slowdown_cdf.svg"
	// RhoCDFFile and PlacementCDFFile are written by every comparison: the
	// finished apps' finish-time fairness and the jobs' placement slowdown.
	// AppsFile is every app's finish-time fairness (sim.AppResult).
	AppsFile         = "apps.csv"
	RhoCDFFile       = "rho_cdf.svg"
	PlacementCDFFile = "placement_cdf.svg"
)

// jobsHeader is the header row of jobs.csv.
var jobsHeader = []string{
	"id", "vc", "model", "gpus", "submit_s", "start_s", "end_s",
	"duration_s", "jct_s", "queue_s", "preemptions", "finished",
	"class", "slowdown",
}

// WriteRun writes the report of one run into dir (created if missing):
// summary.json, jobs.csv, apps.csv, report.md, jct_cdf.svg, queue_cdf.svg and
// utilization.svg.
func WriteRun(dir string, r sim.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create report directory %q: %w", dir, err)
	}
	s := Summarize(r)
	js, err := marshalJSON(s)
	if err != nil {
		return fmt.Errorf("encode summary of policy %q: %w", r.Policy, err)
	}
	if err := writeFile(filepath.Join(dir, SummaryFile), js); err != nil {
		return err
	}
	jobs, err := jobsCSV(r.Jobs)
	if err != nil {
		return fmt.Errorf("encode jobs of policy %q: %w", r.Policy, err)
	}
	if err := writeFile(filepath.Join(dir, JobsFile), jobs); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, ReportFile), runMarkdown(s)); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, AppsFile), appsCSV(r.Apps)); err != nil {
		return err
	}

	jct, queue := finishedJobs(r.Jobs)
	if err := writeCDF(filepath.Join(dir, JCTCDFFile), "JCT CDF: "+r.Policy, "job completion time",
		[]series{{name: r.Policy, xy: cdfPoints(jct)}}, true); err != nil {
		return err
	}
	if err := writeCDF(filepath.Join(dir, QueueCDFFile), "Queueing delay CDF: "+r.Policy, "queueing delay",
		[]series{{name: r.Policy, xy: cdfPoints(queue)}}, false); err != nil {
		return err
	}
	return writeUtil(filepath.Join(dir, UtilizationFile), r)
}

// marshalJSON is indented JSON with a final newline.
func marshalJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// jobsCSV is one row per job in trace order; start_s is empty for a job
// that never started, end_s and jct_s for one that did not finish.
func jobsCSV(jobs []sim.JobResult) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(jobsHeader); err != nil {
		return nil, err
	}
	for _, j := range jobs {
		start, end, jct := "", "", ""
		if j.Started {
			start = formatFloat(j.Start)
		}
		if j.Finished {
			end, jct = formatFloat(j.End), formatFloat(j.JCT())
		}
		row := []string{
			j.ID, j.VC, j.Model, strconv.Itoa(j.GPUs),
			Num(j.Submit).String(), start, end,
			Num(j.Duration).String(), jct, Num(j.Queue).String(),
			strconv.Itoa(j.Preemptions), strconv.FormatBool(j.Finished),
			j.Class, "",
		}
		if j.Finished {
			row[len(row)-1] = Num(j.Slowdown()).String()
		}
		if err := w.Write(row); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// runMarkdown is report.md: a table of the summary and links to the plots
// and data.
func runMarkdown(s Summary) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Simulation run: %s\n\n", mdCell(s.Policy))
	b.WriteString("| Run | |\n|---|---|\n")
	fmt.Fprintf(&b, "| Policy | %s |\n", mdCell(s.Policy))
	fmt.Fprintf(&b, "| Trace | %s |\n", mdCell(s.Trace))
	fmt.Fprintf(&b, "| Cluster | %s (%d GPUs) |\n", mdCell(s.Cluster), s.TotalGPUs)
	fmt.Fprintf(&b, "| Seed | %d |\n", s.Seed)
	settings := make([]string, len(s.Settings))
	for i, kv := range s.Settings {
		settings[i] = mdCode(kv)
	}
	if len(settings) == 0 {
		settings = []string{"(defaults)"}
	}
	fmt.Fprintf(&b, "| Settings | %s |\n\n", strings.Join(settings, ", "))

	b.WriteString("| Metric | Value |\n|---|---:|\n")
	row := func(name string, v string) { fmt.Fprintf(&b, "| %s | %s |\n", name, v) }
	row("Jobs finished / started / total", fmt.Sprintf("%d / %d / %d", s.Finished, s.Started, s.Jobs))
	row("Average JCT", mdSeconds(s.AvgJCT))
	row("Median JCT", mdSeconds(s.MedianJCT))
	row("p95 JCT", mdSeconds(s.P95JCT))
	row("p99 JCT", mdSeconds(s.P99JCT))
	row("Max JCT", mdSeconds(s.MaxJCT))
	row("Average queueing delay", mdSeconds(s.AvgQueue))
	row("Median queueing delay", mdSeconds(s.MedianQueue))
	row("p95 queueing delay", mdSeconds(s.P95Queue))
	row("Makespan", mdSeconds(s.Makespan))
	row("Busy GPU time", mdNum(s.GPUTime)+" GPU-s")
	row("Utilization", mdPercent(s.Utilization))
	row("Preemptions", strconv.Itoa(s.Preemptions))
	if s.LostWork != nil {
		row("GPU-seconds of work lost to preemption", mdNum(*s.LostWork)+" GPU-s")
	}
	row("Apps finished", fmt.Sprintf("%d / %d", s.AppsFinished, s.Apps))
	row("Finish-time fairness rho: max / median", mdNum(s.MaxRho)+" / "+mdNum(s.MedianRho))
	row("Apps with rho <= 1", mdPercent(s.FracRhoLE1))
	row("Average placement slowdown", mdNum(s.AvgPlacementScore))
	row("Jobs preempted at least once", strconv.Itoa(s.PreemptedJobs))
	if s.MedianRestart.Defined() {
		row("Preemption to restart, median / p95", mdSeconds(s.MedianRestart)+" / "+mdSeconds(s.P95Restart))
	}
	if s.TEMedianSlowdown.Defined() {
		row("TE slowdown, median / p95", mdNum(s.TEMedianSlowdown)+" / "+mdNum(s.TEP95Slowdown))
	}
	if s.BEMedianSlowdown.Defined() {
		row("BE slowdown, median / p95", mdNum(s.BEMedianSlowdown)+" / "+mdNum(s.BEP95Slowdown))
	}
	if len(s.VCs) > 0 {
		fmt.Fprintf(&b, "\n## Virtual clusters (%s)\n\n", mdCell(s.VCMode))
		fmt.Fprintf(&b, "%d sharing anomalies (VCs whose average queueing delay is longer shared than in their private cluster); the largest excess is %s s.\n\n",
			*s.SharingAnomalies, mdNum(*s.MaxExcessQueue))
		if s.PrivateAvgQueue != nil {
			fmt.Fprintf(&b, "Average queueing delay of all finished jobs: %s s shared, %s s in the private clusters.\n\n", mdNum(s.AvgQueue), mdNum(*s.PrivateAvgQueue))
		}
		b.WriteString("| VC | GPUs | Jobs | Finished (shared / private) | Avg queue shared (s) | Avg queue private (s) | Excess (s) | p95 queue shared / private (s) | Preemptions | Anomaly |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, v := range s.VCs {
			anomaly := ""
			if v.Anomaly {
				anomaly = "yes"
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d / %d | %s | %s | %s | %s / %s | %d | %s |\n", mdCell(v.Name), v.GPUs, v.Jobs,
				v.Finished, v.PrivateFinished, mdNum(v.AvgQueue), mdNum(v.PrivateAvgQueue), mdNum(v.ExcessQueue),
				mdNum(v.P95Queue), mdNum(v.PrivateP95Queue), v.Preemptions, anomaly)
		}
	}
	b.WriteString("\nJCT, queueing and slowdown statistics are over finished jobs; percentiles are nearest-rank. " +
		"Slowdown is 1 + queueing delay / execution time (FitGpp's slowdown rate).\n\n")

	b.WriteString("## Plots\n\n")
	fmt.Fprintf(&b, "![JCT CDF](%s)\n\n", JCTCDFFile)
	fmt.Fprintf(&b, "![Queueing delay CDF](%s)\n\n", QueueCDFFile)
	fmt.Fprintf(&b, "![Busy GPUs over time](%s)\n\n", UtilizationFile)
	fmt.Fprintf(&b, "Data: [%s](%s), [%s](%s).\n\n", SummaryFile, SummaryFile, JobsFile, JobsFile)
	// The one line that depends on more than the input.
	fmt.Fprintf(&b, "Simulator wall time: %s s.\n", mdNum(s.Wall))
	return []byte(b.String())
}

// mdCell escapes text for a Markdown table cell.
func mdCell(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", ">", "&gt;",
		"*", `\*`, "_", `\_`, "`", "\\`", "[", `\[`, "]", `\]`,
		"\r\n", " ", "\n", " ", "\r", " ")
	return r.Replace(s)
}

// mdCode is s as inline code, safe in a table cell.
func mdCode(s string) string {
	s = strings.NewReplacer("|", `\|`, "\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence + " " + s + " " + fence
}

// mdNum formats n for Markdown: "n/a" when undefined.
func mdNum(n Num) string {
	if !n.Defined() {
		return "n/a"
	}
	return n.String()
}

// mdSeconds formats a duration in seconds, with hours for long ones.
func mdSeconds(n Num) string {
	if !n.Defined() {
		return "n/a"
	}
	s := n.String() + " s"
	if float64(n) >= 3600 {
		s += fmt.Sprintf(" (%s h)", strconv.FormatFloat(float64(n)/3600, 'f', 2, 64))
	}
	return s
}

// mdPercent formats a fraction as a percentage.
func mdPercent(n Num) string {
	if !n.Defined() {
		return "n/a"
	}
	return strconv.FormatFloat(float64(n)*100, 'f', 1, 64) + " %"
}

// appsCSV is one row per app (sim.AppResult): rho and end_s are empty for
// an app that did not finish; shared_ideal_s, shared_rho and floor are
// empty until a comparison sets them (sim.ShareIdeal, sim.Floors).
func appsCSV(apps []sim.AppResult) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write([]string{"app", "jobs", "arrival_s", "end_s", "work_gpu_s", "demand_max", "n_avg", "ideal_s", "rho", "placement", "finished",
		"shared_ideal_s", "shared_rho", "floor"})
	for _, a := range apps {
		end, rho, navg, ideal := "", "", "", ""
		if a.Finished {
			end, rho, navg, ideal = Num(a.End).String(), Num(a.Rho).String(), Num(a.NAvg).String(), Num(a.Ideal).String()
		}
		sideal, srho, floor := "", "", ""
		if a.SharedIdeal > 0 {
			sideal = Num(a.SharedIdeal).String()
			if a.Finished {
				srho = Num(a.SharedRho).String()
			}
		}
		if a.Floor > 0 {
			floor = Num(a.Floor).String()
		}
		_ = w.Write([]string{a.ID, strconv.Itoa(a.Jobs), Num(a.Arrival).String(), end, Num(a.Work).String(),
			strconv.Itoa(a.DemandMax), navg, ideal, rho, Num(a.Placement).String(), strconv.FormatBool(a.Finished),
			sideal, srho, floor})
	}
	w.Flush()
	return buf.Bytes()
}
