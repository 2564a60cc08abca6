package report

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/themis-nomad/themis/planner/sim"
)

// Files WriteComparison writes into its directory, besides one WriteRun
// directory per policy and the overlay plots JCTCDFFile and QueueCDFFile.
const (
	ComparisonJSONFile = "comparison.json"
	ComparisonFile     = "comparison.md"
)

// Binning splits jobs by size and length as Tiresias does (Table 3): small
// jobs need at most SmallMaxGPUs GPUs, short jobs have a trace Duration
// under ShortBelowSeconds.
type Binning struct {
	SmallMaxGPUs      int     `json:"small_max_gpus"`
	ShortBelowSeconds float64 `json:"short_below_s"`
}

var (
	// TiresiasBinning is the paper's binning of the Microsoft trace: small
	// is at most 8 GPUs (one 8-GPU machine), short is under 4 hours.
	TiresiasBinning = Binning{SmallMaxGPUs: 8, ShortBelowSeconds: 4 * 3600}
	// TiresiasTestbedBinning is the paper's binning of its scaled-down
	// testbed: at most 4 GPUs, under 800 seconds.
	TiresiasTestbedBinning = Binning{SmallMaxGPUs: 4, ShortBelowSeconds: 800}
)

// binNames are the bins in Tiresias's order: Bin1 SS .. Bin4 LL.
var binNames = [4]string{"SS", "SL", "LS", "LL"}

// bin is the index in binNames of j's bin.
func (b Binning) bin(j sim.JobResult) int {
	i := 0
	if j.GPUs > b.SmallMaxGPUs {
		i += 2
	}
	if !(j.Duration < b.ShortBelowSeconds) {
		i++
	}
	return i
}

// describe is a bin's meaning in words.
func (b Binning) describe(i int) string {
	size := fmt.Sprintf("at most %d GPUs", b.SmallMaxGPUs)
	if i >= 2 {
		size = fmt.Sprintf("more than %d GPUs", b.SmallMaxGPUs)
	}
	length := fmt.Sprintf("shorter than %s s", formatFloat(b.ShortBelowSeconds))
	if i%2 == 1 {
		length = fmt.Sprintf("at least %s s", formatFloat(b.ShortBelowSeconds))
	}
	return size + ", " + length
}

// Comparison is several policies' runs on one trace and cluster, each
// measured against the reference policy; written to comparison.json.
type Comparison struct {
	Reference string             `json:"reference"`
	Trace     string             `json:"trace"`
	Cluster   string             `json:"cluster"`
	TotalGPUs int                `json:"total_gpus"`
	Binning   Binning            `json:"binning"`
	Policies  []PolicyComparison `json:"policies"`
}

// PolicyComparison is one policy's row of a Comparison.
type PolicyComparison struct {
	Policy   string `json:"policy"`
	Seed     int64  `json:"seed"`
	Jobs     int    `json:"jobs"`
	Finished int    `json:"finished"`
	// Metrics are the policy's own values, Factors the reference's values
	// divided by them.
	Metrics Metrics    `json:"metrics"`
	Factors Factors    `json:"factors"`
	Bins    []BinStats `json:"bins"`
	// Classes are FitGpp's per-class metrics: present when some job of
	// the run is a trial-and-error job.
	Classes *ClassMetrics `json:"classes,omitempty"`
	// Fairness is the Themis paper's metrics (see Summary): finish-time
	// fairness over apps, GPU time and placement.
	Fairness FairnessMetrics `json:"fairness"`
}

// FairnessMetrics are one run's finish-time fairness (Summary's fields of
// the same names), GPU time, and GPU time relative to the reference's
// (policy / reference).
type FairnessMetrics struct {
	AppFairness
	GPUTime      Num `json:"gpu_time_s"`
	GPUTimeRatio Num `json:"gpu_time_ratio"`
}

// ClassMetrics are FitGpp's metrics of one run (see Summary), and the
// relative change of the slowdowns against the reference (policy /
// reference - 1: -0.96 is a 96% cut, 0.18 an 18% rise).
type ClassMetrics struct {
	ClassSummary

	TEP95Change    Num `json:"te_p95_slowdown_change"`
	BEMedianChange Num `json:"be_median_slowdown_change"`
	BEP95Change    Num `json:"be_p95_slowdown_change"`
}

// Metrics are the compared metrics of one run, in seconds except
// Preemptions.
type Metrics struct {
	AvgJCT      Num `json:"avg_jct_s"`
	MedianJCT   Num `json:"median_jct_s"`
	P95JCT      Num `json:"p95_jct_s"`
	AvgQueue    Num `json:"avg_queue_s"`
	Makespan    Num `json:"makespan_s"`
	Preemptions Num `json:"preemptions"`
	// LostWork is the GPU-seconds of work lost to preemption: present for
	// runs with periodic checkpoints only (Summary.LostWork).
	LostWork *Num `json:"lost_work_gpu_s,omitempty"`
}

// Factors are factors of improvement (reference / policy; > 1 is better
// than the reference) of the Metrics of the same name.
type Factors struct {
	AvgJCT      Num `json:"avg_jct"`
	MedianJCT   Num `json:"median_jct"`
	P95JCT      Num `json:"p95_jct"`
	AvgQueue    Num `json:"avg_queue"`
	Makespan    Num `json:"makespan"`
	Preemptions Num `json:"preemptions"`
}

// BinStats is one job bin of one policy: the average JCT and queueing delay
// of the bin's finished jobs and their factors of improvement.
type BinStats struct {
	Bin            string `json:"bin"`
	Jobs           int    `json:"jobs"`
	Finished       int    `json:"finished"`
	AvgJCT         Num    `json:"avg_jct_s"`
	AvgQueue       Num    `json:"avg_queue_s"`
	AvgJCTFactor   Num    `json:"avg_jct_factor"`
	AvgQueueFactor Num    `json:"avg_queue_factor"`
}

// Compare measures each run against the run of policy reference. The runs
// must have distinct, non-empty policy names usable as directory names and
// share one trace and cluster; their order is kept.
func Compare(results []sim.Result, reference string, b Binning) (Comparison, error) {
	if len(results) == 0 {
		return Comparison{}, errors.New("compare policies: no results")
	}
	ref := -1
	seen := make(map[string]bool, len(results))
	for i, r := range results {
		if err := checkPolicyName(r.Policy); err != nil {
			return Comparison{}, fmt.Errorf("compare policies: result %d: %w", i, err)
		}
		if seen[r.Policy] {
			return Comparison{}, fmt.Errorf("compare policies: policy %q appears twice", r.Policy)
		}
		seen[r.Policy] = true
		if r.Trace != results[0].Trace || r.Cluster != results[0].Cluster {
			return Comparison{}, fmt.Errorf(
				"compare policies: policy %q ran trace %q on cluster %q, policy %q trace %q on cluster %q",
				r.Policy, r.Trace, r.Cluster, results[0].Policy, results[0].Trace, results[0].Cluster)
		}
		if r.Policy == reference {
			ref = i
		}
	}
	if ref < 0 {
		return Comparison{}, fmt.Errorf("compare policies: reference policy %q is not among the results", reference)
	}

	c := Comparison{
		Reference: reference,
		Trace:     results[0].Trace,
		Cluster:   results[0].Cluster,
		TotalGPUs: results[0].TotalGPUs,
		Binning:   b,
	}
	rows := make([]PolicyComparison, len(results))
	for i, r := range results {
		rows[i] = policyRow(r, b)
	}
	refRow := rows[ref]
	for i := range rows {
		p := &rows[i]
		m, rm := p.Metrics, refRow.Metrics
		p.Factors = Factors{
			AvgJCT:      factor(rm.AvgJCT, m.AvgJCT),
			MedianJCT:   factor(rm.MedianJCT, m.MedianJCT),
			P95JCT:      factor(rm.P95JCT, m.P95JCT),
			AvgQueue:    factor(rm.AvgQueue, m.AvgQueue),
			Makespan:    factor(rm.Makespan, m.Makespan),
			Preemptions: factor(rm.Preemptions, m.Preemptions),
		}
		if p.Classes != nil && refRow.Classes != nil {
			c, rc := p.Classes, refRow.Classes
			c.TEP95Change = change(rc.TEP95Slowdown, c.TEP95Slowdown)
			c.BEMedianChange = change(rc.BEMedianSlowdown, c.BEMedianSlowdown)
			c.BEP95Change = change(rc.BEP95Slowdown, c.BEP95Slowdown)
		}
		p.Fairness.GPUTimeRatio = ratio(p.Fairness.GPUTime, refRow.Fairness.GPUTime)
		for k := range p.Bins {
			p.Bins[k].AvgJCTFactor = factor(refRow.Bins[k].AvgJCT, p.Bins[k].AvgJCT)
			p.Bins[k].AvgQueueFactor = factor(refRow.Bins[k].AvgQueue, p.Bins[k].AvgQueue)
		}
	}
	c.Policies = rows
	return c, nil
}

// policyRow is r's metrics and bins, without factors.
func policyRow(r sim.Result, b Binning) PolicyComparison {
	s := Summarize(r)
	p := PolicyComparison{
		Policy:   r.Policy,
		Seed:     r.Seed,
		Jobs:     s.Jobs,
		Finished: s.Finished,
		Metrics: Metrics{
			AvgJCT:      s.AvgJCT,
			MedianJCT:   s.MedianJCT,
			P95JCT:      s.P95JCT,
			AvgQueue:    s.AvgQueue,
			Makespan:    s.Makespan,
			Preemptions: Num(s.Preemptions),
			LostWork:    s.LostWork,
		},
	}
	p.Fairness = FairnessMetrics{AppFairness: s.AppFairness, GPUTime: s.GPUTime}
	for _, j := range r.Jobs {
		if j.Class == "te" {
			p.Classes = &ClassMetrics{ClassSummary: s.ClassSummary}
			break
		}
	}
	var jobs [len(binNames)][]sim.JobResult
	for _, j := range r.Jobs {
		k := b.bin(j)
		jobs[k] = append(jobs[k], j)
	}
	p.Bins = make([]BinStats, len(binNames))
	for k, name := range binNames {
		jct, queue := finishedJobs(jobs[k])
		p.Bins[k] = BinStats{
			Bin:      name,
			Jobs:     len(jobs[k]),
			Finished: len(jct),
			AvgJCT:   mean(jct),
			AvgQueue: mean(queue),
		}
	}
	return p
}

// checkPolicyName rejects names that cannot be a directory of their own.
func checkPolicyName(name string) error {
	switch {
	case name == "":
		return errors.New("empty policy name")
	case name == "." || name == "..",
		strings.ContainsAny(name, `/\`+"\x00"),
		strings.ContainsRune(name, os.PathSeparator):
		return fmt.Errorf("policy name %q cannot name a directory", name)
	case name == ComparisonJSONFile || name == ComparisonFile ||
		name == JCTCDFFile || name == QueueCDFFile || name == RhoCDFFile || name == PlacementCDFFile:
		return fmt.Errorf("policy name %q collides with a comparison file", name)
	}
	return nil
}

// WriteComparison writes comparison.json, comparison.md and the overlay
// plots jct_cdf.svg and queue_cdf.svg into dir, and each run's own report
// into dir/<policy>/. Job bins follow TiresiasBinning.
func WriteComparison(dir string, results []sim.Result, reference string) error {
	return WriteComparisonBinned(dir, results, reference, TiresiasBinning)
}

// WriteComparisonBinned is WriteComparison with a chosen binning.
func WriteComparisonBinned(dir string, results []sim.Result, reference string, b Binning) error {
	c, err := Compare(results, reference, b)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create comparison directory %q: %w", dir, err)
	}
	js, err := marshalJSON(c)
	if err != nil {
		return fmt.Errorf("encode comparison: %w", err)
	}
	if err := writeFile(filepath.Join(dir, ComparisonJSONFile), js); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, ComparisonFile), comparisonMarkdown(c)); err != nil {
		return err
	}

	jcts := make([]series, len(results))
	queues := make([]series, len(results))
	for i, r := range results {
		jct, queue := finishedJobs(r.Jobs)
		jcts[i] = series{name: r.Policy, xy: cdfPoints(jct)}
		queues[i] = series{name: r.Policy, xy: cdfPoints(queue)}
	}
	if err := writeCDF(filepath.Join(dir, JCTCDFFile), "JCT CDF", "job completion time", jcts, true); err != nil {
		return err
	}
	if err := writeCDF(filepath.Join(dir, QueueCDFFile), "Queueing delay CDF", "queueing delay", queues, false); err != nil {
		return err
	}
	rhos := make([]series, len(results))
	places := make([]series, len(results))
	for i, r := range results {
		var finite []float64
		for _, x := range AppRhos(r) {
			if !math.IsInf(x, 0) && !math.IsNaN(x) {
				finite = append(finite, x)
			}
		}
		rhos[i] = series{name: r.Policy, xy: cdfPoints(finite)}
		places[i] = series{name: r.Policy, xy: cdfPoints(PlacementScores(r))}
	}
	if err := writeCDFAxis(filepath.Join(dir, RhoCDFFile), "Finish-time fairness CDF (finished apps)", "rho = T_shared / T_ideal", rhos, true, false); err != nil {
		return err
	}
	if err := writeCDFAxis(filepath.Join(dir, PlacementCDFFile), "Placement CDF", "placement slowdown of a job (1 = one machine)", places, false, false); err != nil {
		return err
	}
	var slow []series
	for i, r := range results {
		if c.Policies[i].Classes == nil {
			continue
		}
		for _, class := range []string{"te", "be"} {
			slow = append(slow, series{name: r.Policy + " " + class, xy: cdfPoints(slowdowns(r.Jobs, class))})
		}
	}
	if len(slow) > 0 {
		if err := writeCDFAxis(filepath.Join(dir, SlowdownCDFFile), "Slowdown CDF by class", "slowdown (1 + queueing / execution time)", slow, true, false); err != nil {
			return err
		}
	}
	for _, r := range results {
		if err := WriteRun(filepath.Join(dir, r.Policy), r); err != nil {
			return fmt.Errorf("report of policy %q: %w", r.Policy, err)
		}
	}
	return nil
}

// comparisonMarkdown is comparison.md.
func comparisonMarkdown(c Comparison) []byte {
	var b strings.Builder
	b.WriteString("# Policy comparison\n\n")
	fmt.Fprintf(&b, "Trace %s on cluster %s (%d GPUs). Reference policy: **%s**.\n\n",
		mdCell(c.Trace), mdCell(c.Cluster), c.TotalGPUs, mdCell(c.Reference))
	b.WriteString("Each ×-column is the factor of improvement, reference / policy: " +
		"above 1 the policy does better than the reference. " +
		"JCT and queueing statistics are over finished jobs; percentiles are nearest-rank; " +
		"n/a marks a value that cannot be computed.\n\n")

	b.WriteString("## Overall\n\n")
	b.WriteString("| Policy | Finished | Avg JCT (s) | × | Median JCT (s) | × | p95 JCT (s) | × " +
		"| Avg queue (s) | × | Makespan (s) | × | Preemptions | × |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range c.Policies {
		m, f := p.Metrics, p.Factors
		fmt.Fprintf(&b, "| %s | %d / %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			mdCell(p.Policy), p.Finished, p.Jobs,
			mdNum(m.AvgJCT), mdFactor(f.AvgJCT), mdNum(m.MedianJCT), mdFactor(f.MedianJCT),
			mdNum(m.P95JCT), mdFactor(f.P95JCT), mdNum(m.AvgQueue), mdFactor(f.AvgQueue),
			mdNum(m.Makespan), mdFactor(f.Makespan), mdNum(m.Preemptions), mdFactor(f.Preemptions))
	}

	lostWorkMarkdown(&b, c)

	b.WriteString("\n## By job bin\n\n")
	b.WriteString("Bins as in Tiresias (Table 3), by GPUs and trace duration:\n\n")
	b.WriteString("| Bin | Jobs | Meaning |\n|---|---:|---|\n")
	for k, name := range binNames {
		jobs := 0
		if len(c.Policies) > 0 {
			jobs = c.Policies[0].Bins[k].Jobs
		}
		fmt.Fprintf(&b, "| Bin%d %s | %d | %s |\n", k+1, name, jobs, mdCell(c.Binning.describe(k)))
	}
	binTable := func(title string, val, fac func(BinStats) Num) {
		fmt.Fprintf(&b, "\n### %s\n\n| Policy |", title)
		for _, name := range binNames {
			fmt.Fprintf(&b, " %s (s) | × |", name)
		}
		b.WriteString("\n|---|")
		b.WriteString(strings.Repeat("---:|---:|", len(binNames)))
		b.WriteString("\n")
		for _, p := range c.Policies {
			fmt.Fprintf(&b, "| %s |", mdCell(p.Policy))
			for _, bs := range p.Bins {
				fmt.Fprintf(&b, " %s | %s |", mdNum(val(bs)), mdFactor(fac(bs)))
			}
			b.WriteString("\n")
		}
	}
	binTable("Average JCT",
		func(s BinStats) Num { return s.AvgJCT }, func(s BinStats) Num { return s.AvgJCTFactor })
	binTable("Average queueing delay",
		func(s BinStats) Num { return s.AvgQueue }, func(s BinStats) Num { return s.AvgQueueFactor })

	classes := false
	for _, p := range c.Policies {
		classes = classes || p.Classes != nil
	}
	if classes {
		b.WriteString("\n## Job classes (FitGpp)\n\n")
		b.WriteString("Slowdown is 1 + queueing delay / execution time, over finished jobs of the class; " +
			"Δ is the change against the reference (−96% is a 96% cut). " +
			"Restart is the time from a preemption to the job's next start.\n\n")
		b.WriteString("| Policy | TE median | TE p95 | Δ TE p95 | BE median | Δ BE median | BE p95 | Δ BE p95 " +
			"| Preempted jobs | Restart median (s) | Restart p95 (s) |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range c.Policies {
			k := p.Classes
			if k == nil {
				k = &ClassMetrics{ClassSummary: ClassSummary{TEMedianSlowdown: undefined(), TEP95Slowdown: undefined(),
					BEMedianSlowdown: undefined(), BEP95Slowdown: undefined(), MedianRestart: undefined(), P95Restart: undefined()},
					TEP95Change: undefined(), BEMedianChange: undefined(), BEP95Change: undefined()}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n", mdCell(p.Policy),
				mdNum(k.TEMedianSlowdown), mdNum(k.TEP95Slowdown), mdChange(k.TEP95Change),
				mdNum(k.BEMedianSlowdown), mdChange(k.BEMedianChange), mdNum(k.BEP95Slowdown), mdChange(k.BEP95Change),
				k.PreemptedJobs, mdNum(k.MedianRestart), mdNum(k.P95Restart))
		}
	}

	b.WriteString("\n## Finish-time fairness (Themis)\n\n")
	b.WriteString("rho = app finish time / T_ideal per app (null max: some app did not finish); " +
		"placement is a job's slowdown from its GPUs' spread, 1 = one machine; " +
		"GPU time is busy GPU-seconds, ratio = policy / reference.\n\n")
	b.WriteString("p95 and p99 rho are nearest-rank; shared rho uses one T_ideal per app for every run on the same trace " +
		"(the least of the runs' T_ideal); rho / floor divides by the app's rho alone on the empty cluster.\n\n")
	b.WriteString("| Policy | Apps finished | Max rho | p99 rho | p95 rho | Median rho | rho <= 1 | Max shared rho | p95 shared rho | Max rho / floor | Avg placement | GPU time (s) | GPU time ratio |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	opt := func(n *Num) string {
		if n == nil {
			return "n/a"
		}
		return mdNum(*n)
	}
	for _, p := range c.Policies {
		f := p.Fairness
		fmt.Fprintf(&b, "| %s | %d / %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(p.Policy), f.AppsFinished, f.Apps,
			mdNum(f.MaxRho), mdNum(f.P99Rho), mdNum(f.P95Rho), mdNum(f.MedianRho), mdPercent(f.FracRhoLE1),
			opt(f.MaxSharedRho), opt(f.P95SharedRho), opt(f.MaxRhoOverFloor),
			mdNum(f.AvgPlacementScore), mdNum(f.GPUTime), mdNum(f.GPUTimeRatio))
	}

	b.WriteString("\n## Plots\n\n")
	fmt.Fprintf(&b, "![JCT CDF](%s)\n\n![Queueing delay CDF](%s)\n\n", JCTCDFFile, QueueCDFFile)
	fmt.Fprintf(&b, "![rho CDF](%s)\n\n![Placement CDF](%s)\n\n", RhoCDFFile, PlacementCDFFile)
	if classes {
		fmt.Fprintf(&b, "![Slowdown CDF by class](%s)\n\n", SlowdownCDFFile)
	}
	b.WriteString("## Runs\n\n")
	for _, p := range c.Policies {
		fmt.Fprintf(&b, "- [%s](%s/%s)\n", mdCell(p.Policy), url.PathEscape(p.Policy), ReportFile)
	}
	return []byte(b.String())
}

// mdChange formats a relative change as "-96.6%".
func mdChange(n Num) string {
	if !n.Defined() {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*float64(n))
}

// change is policy / reference - 1, undefined when the reference is 0 or
// either is undefined.
func change(ref, policy Num) Num {
	if !ref.Defined() || !policy.Defined() || ref == 0 {
		return undefined()
	}
	return Num(float64(policy)/float64(ref) - 1)
}

// mdFactor formats a factor of improvement as "1.234×".
func mdFactor(n Num) string {
	if !n.Defined() {
		return "n/a"
	}
	return n.String() + "×"
}

// ratio is policy / reference, undefined when either is undefined or the
// reference is 0.
func ratio(policy, ref Num) Num {
	if !policy.Defined() || !ref.Defined() || ref == 0 {
		return undefined()
	}
	return policy / ref
}
