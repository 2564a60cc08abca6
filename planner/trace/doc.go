// Package trace loads job traces for the simulator ("themis sim --trace
// FILE"): which jobs arrive when, how many GPUs each gang needs, how long it
// runs at full speed and which virtual cluster (VC) it belongs to.
//
// Load and Parse detect the format from the CSV header (Philly, Tiresias,
// Muri), re-base submissions to 0 and sort jobs by them; a bad row is a
// LineError naming the file, line and column. LoadSizes reads a job-size
// distribution, 2D-Gittins's prior. The formats and what is accepted:
// docs/simulator.md, "Trace formats".
package trace
