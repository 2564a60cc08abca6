package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/themis-nomad/themis/planner/sim"
)

// SweepFile is the sweep's table (WriteSweep).
const SweepFile = "sweep.md"

// KnobWorkloadSeed is the knob whose runs a sweep's medians are taken over.
const KnobWorkloadSeed = "workload.seed"

// sweepLabel splits a run's label, "policy[k1=v1,k2=v2]" as `themis sim
// --sweep` writes it, into the policy with its non-workload knobs
// ("las[sim.realloc=10m]"), the workload setting without the seed
// ("workload.arrival_scale=0.5") and the seed's value ("" when not swept).
func sweepLabel(label string) (policy, setting, seed string) {
	name, rest, ok := strings.Cut(label, "[")
	if !ok {
		return label, "", ""
	}
	var own, work []string
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "]"), ",") {
		switch {
		case strings.HasPrefix(kv, KnobWorkloadSeed+"="):
			seed = strings.TrimPrefix(kv, KnobWorkloadSeed+"=")
		case strings.HasPrefix(kv, "workload."):
			work = append(work, kv)
		default:
			own = append(own, kv)
		}
	}
	policy = name
	if len(own) > 0 {
		policy += "[" + strings.Join(own, ",") + "]"
	}
	return policy, strings.Join(work, ","), seed
}

// WriteSweep writes DIR/sweep.md for a sweep over workload knobs: every
// run's fairness, GPU time, average JCT and preemptions (policy x setting x
// seed), the medians of each over workload.seed per policy and setting,
// and a ρ CDF per setting (rho_cdf_N.svg) with one line per policy, the
// finished apps of all its seeds pooled.
func WriteSweep(dir string, results []sim.Result) error {
	type row struct {
		policy, setting, seed string
		s                     Summary
		r                     *sim.Result
	}
	var rows []row
	var settings []string
	for i := range results {
		p, set, seed := sweepLabel(results[i].Policy)
		rows = append(rows, row{p, set, seed, Summarize(results[i]), &results[i]})
		if !slices.Contains(settings, set) {
			settings = append(settings, set)
		}
	}
	opt := func(n *Num) string {
		if n == nil {
			return "n/a"
		}
		return mdNum(*n)
	}
	var b strings.Builder
	b.WriteString("# Sweep\n\n")
	b.WriteString("rho as in comparison.md: max, p99, p95 and median over apps (nearest rank); shared rho uses one T_ideal per app " +
		"for every run on the same trace; rho / floor divides by the app's rho alone on the empty cluster. " +
		"GPU time is busy GPU-seconds.\n\n## Medians over " + KnobWorkloadSeed + "\n\n")
	b.WriteString("| Policy | Setting | Seeds | Max rho | p99 rho | p95 rho | Median rho | Max shared rho | p95 shared rho | Max rho / floor | GPU time (s) | Avg JCT (s) | Preemptions |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	type group struct {
		policy, setting string
		rows            []row
	}
	var groups []*group
	for _, r := range rows {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.policy == r.policy && g.setting == r.setting })
		if i < 0 {
			groups = append(groups, &group{policy: r.policy, setting: r.setting})
			i = len(groups) - 1
		}
		groups[i].rows = append(groups[i].rows, r)
	}
	med := func(g *group, f func(Summary) float64) string {
		xs := make([]float64, 0, len(g.rows))
		for _, r := range g.rows {
			xs = append(xs, f(r.s))
		}
		return mdNum(median(xs))
	}
	ptr := func(n *Num) float64 {
		if n == nil {
			return math.NaN()
		}
		return float64(*n)
	}
	for _, g := range groups {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(g.policy), mdCell(g.setting), len(g.rows),
			med(g, func(s Summary) float64 { return float64(s.MaxRho) }),
			med(g, func(s Summary) float64 { return float64(s.P99Rho) }),
			med(g, func(s Summary) float64 { return float64(s.P95Rho) }),
			med(g, func(s Summary) float64 { return float64(s.MedianRho) }),
			med(g, func(s Summary) float64 { return ptr(s.MaxSharedRho) }),
			med(g, func(s Summary) float64 { return ptr(s.P95SharedRho) }),
			med(g, func(s Summary) float64 { return ptr(s.MaxRhoOverFloor) }),
			med(g, func(s Summary) float64 { return float64(s.GPUTime) }),
			med(g, func(s Summary) float64 { return float64(s.AvgJCT) }),
			med(g, func(s Summary) float64 { return float64(s.Preemptions) }))
	}
	b.WriteString("\n## Every run\n\n")
	b.WriteString("| Policy | Setting | Seed | Max rho | p99 rho | p95 rho | Median rho | Max shared rho | p95 shared rho | Max rho / floor | Apps with floor > 1 | GPU time (s) | Avg JCT (s) | Preemptions |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		above := "n/a"
		if r.s.AppsFloorAbove1 != nil {
			above = fmt.Sprint(*r.s.AppsFloorAbove1)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", mdCell(r.policy), mdCell(r.setting), mdCell(r.seed),
			mdNum(r.s.MaxRho), mdNum(r.s.P99Rho), mdNum(r.s.P95Rho), mdNum(r.s.MedianRho),
			opt(r.s.MaxSharedRho), opt(r.s.P95SharedRho), opt(r.s.MaxRhoOverFloor), above,
			mdNum(r.s.GPUTime), mdNum(r.s.AvgJCT), r.s.Preemptions)
	}
	b.WriteString("\n## rho CDFs, one per setting (finished apps of every seed)\n\n")
	for k, set := range settings {
		var ss []series
		var names []string
		pooled := map[string][]float64{}
		for _, r := range rows {
			if r.setting != set {
				continue
			}
			if !slices.Contains(names, r.policy) {
				names = append(names, r.policy)
			}
			for _, x := range AppRhos(*r.r) {
				if !math.IsInf(x, 0) && !math.IsNaN(x) {
					pooled[r.policy] = append(pooled[r.policy], x)
				}
			}
		}
		for _, n := range names {
			ss = append(ss, series{name: n, xy: cdfPoints(pooled[n])})
		}
		file := fmt.Sprintf("rho_cdf_%d.svg", k+1)
		title := "Finish-time fairness CDF"
		if set != "" {
			title += " (" + set + ")"
		}
		if err := writeCDFAxis(filepath.Join(dir, file), title, "rho = T_shared / T_ideal", ss, true, false); err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s\n\n![rho CDF %s](%s)\n\n", mdCell(set), mdCell(set), file)
	}
	return os.WriteFile(filepath.Join(dir, SweepFile), []byte(b.String()), 0o644)
}

// median is the median of xs (the mean of the middle two for an even
// count), ignoring NaN; NaN when none is left.
func median(xs []float64) Num {
	var ys []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			ys = append(ys, x)
		}
	}
	if len(ys) == 0 {
		return undefined()
	}
	slices.Sort(ys)
	n := len(ys)
	if n%2 == 1 {
		return Num(ys[n/2])
	}
	return Num((ys[n/2-1] + ys[n/2]) / 2)
}
