// Package cluster builds the simulated clusters the simulator replays traces
// against ("themis sim --cluster PRESET_OR_FILE"), as core.Nodes: racks of
// nodes, each node a small tree of cells over its GPUs.
//
// FromPresetOrFile takes a preset (Preset, Presets: n8g8, philly,
// philly-<GPUs>, fitgpp84, themis, ...), a compact spec such as "r4n16g8"
// (ParseSpec) or a topology file in the device plugin's format (Load);
// Uniform, Mixed, PhillyScaled and Themis build shapes in code. How the
// presets are sized from the papers and traces, node naming and the cells
// inside a node: docs/simulator.md, "Simulated clusters".
package cluster
