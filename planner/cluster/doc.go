// Package cluster builds the simulated clusters the simulator replays traces
// against ("themis sim --cluster PRESET_OR_FILE"), as core.Nodes: racks of
// nodes, each node a small tree of cells over its GPUs.
//
// A cluster comes from one of:
//
//   - a preset (Preset, Presets): n2g4, n8g8, philly, philly-full,
//     philly-256, philly-<GPUs> for any multiple of 4, and fitgpp84 (the
//     FitGpp paper's 84 nodes of 32 CPUs, 256 GB and 8 GPUs, whose nodes
//     account CPU and memory);
//   - a compact spec, "[r<racks>]n<nodes per rack>g<GPUs per node>", e.g.
//     "n8g8" (one rack of 8 8-GPU nodes) or "r4n16g8" (ParseSpec, Uniform);
//   - node groups of different shapes (Mixed), e.g. PhillyScaled;
//   - a topology file in the device plugin's format (Load, see package
//     device/topology), so a simulated cluster and a dev cluster can share a
//     file.
//
// FromPresetOrFile tries them in that order (presets, specs, files).
//
// Built nodes are named "<rack>-n<i>" in racks "rack<j>" (numbers zero-padded
// so that names sort in build order); a node's ID is its name; GPU IDs are
// "<node>-g<index>". Every node is schedulable and every GPU healthy. The cells
// inside a node follow common server layouts (NodePath):
//
//	8 GPUs: 2 sockets x 2 PCIe switches x 1 NVLink pair of 2 GPUs
//	        (path "socket0/switch1/pair1", like a DGX-1 and examples/topology)
//	4 GPUs: 2 sockets x 1 pair of 2 GPUs ("socket0/pair0")
//	2 GPUs: one pair ("pair0")
//	1 GPU:  no cells (empty path)
//
// Other node sizes get a flat, empty path: all their GPUs are equally close,
// as no common layout is known to us.
//
// # The philly presets
//
// The Tiresias paper (NSDI'19, appendix A) describes the Philly cluster the
// trace comes from as around 100 4-GPU servers (2016) expanded by more than
// 250 8-GPU servers (2017), interconnected by 100 Gb/s InfiniBand. The
// philly-full preset is that cluster: 100 4-GPU + 250 8-GPU nodes, 2,400
// GPUs. The papers give no rack size; we assume 64 GPUs a rack (16 4-GPU or
// 8 8-GPU nodes), a common top-of-rack size, with each node shape in racks of
// its own, as the two generations were bought a year apart: 7 + 32 racks.
//
// The published trace (philly.csv, 82,247 jobs) is only part of that
// cluster's load: its jobs ask for 3.5e9 GPU-seconds over the 109 days it
// spans, about 374 GPUs busy on average, 16% of 2,400, so on philly-full no
// policy queues and none can be told apart. The philly preset is therefore
// the Philly node mix at the trace's scale: PhillyScaled(480), 20 4-GPU + 50
// 8-GPU nodes in 2 + 7 racks, where the trace's average demand is 78% of the
// cluster and its bursts queue for days, the contended regime in which the
// Tiresias paper compares schedulers (it scales cluster and workload
// together, too). It is the preset the simulator's quality bars refer to.
//
// PhillyScaled(gpus) keeps the 4-GPU:8-GPU node ratio (2:5, i.e. one GPU in
// six on 4-GPU nodes) at any total; philly-256 is PhillyScaled(256), the
// scale of the Themis paper's simulations, where the same trace asks for
// about 1.5 times the cluster on average.
package cluster
