// Package workload generates synthetic, seeded workloads for the simulator.
//
// FitGpp generates the FitGpp paper's (OpML'19) mix of trial-and-error and
// best-effort jobs from truncated normals, with grace periods, submitted so
// that the load stays at 2.0 under FIFO; Describe reports a trace's realised
// statistics. ThemisW1, ThemisW2 and ThemisFig18 build the Themis paper's
// workloads from a trace. FitGppFromKnobs and ThemisFromKnobs read the
// "--set workload.*" knobs. A config gives the same trace on every run.
// FitGpp's parameters, their sources, the load and arrivals:
// docs/simulator.md, "The FitGpp workload".
package workload
