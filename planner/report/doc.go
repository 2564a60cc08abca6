// Package report turns simulation runs (sim.Result) into metrics, tables and
// plots: the files behind `themis sim ... --out DIR`.
//
// Summarize and WriteRun give one run's summary.json, jobs.csv, report.md
// and CDF and utilisation plots; Compare and WriteComparison set several
// policies on one trace side by side, with factors of improvement and
// Tiresias's job bins; WriteSweep writes a sweep. Output depends on the
// input alone (but the wall time), and an undefined statistic is null,
// never NaN. The definitions (JCT, percentiles, GPU time, factors, bins):
// docs/simulator.md, "Report files and definitions".
package report
