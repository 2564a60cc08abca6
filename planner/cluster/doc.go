// Package cluster builds the simulated clusters the simulator replays traces
// against ("themis sim --cluster PRESET_OR_FILE"), as core.Nodes: racks of
// nodes, each node a small tree of cells over its GPUs.
//
// A cluster comes from one of:
//
//   - a preset (Preset, Presets): n2g4, n8g8, philly, philly-full,
//     philly-256, philly-<GPUs> for any multiple of 4, fitgpp84 (the
//     FitGpp paper's 84 nodes of 32 CPUs, 256 GB and 8 GPUs, whose nodes
//     account CPU and memory), and themis and themis-footnote (the Themis
//     paper's heterogeneous cluster with slots, below);
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
// as no common layout is known to us. The themis presets use slots instead
// (below).
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
//
// # The themis presets
//
// The Themis paper (NSDI'20, section 6.1) simulates "a heterogeneous 256
// GPU cluster" with "a 4-level hierarchical locality model for GPU
// placements. Individual GPUs fit onto slots on machines occupying
// different cluster racks." Its footnote 6 lists the machines: "16 8-GPU
// machines (4 slots and 2 GPUs per slot), 6 4-GPU machines (4 slots and 1
// GPU per slot), and 16 1-GPU machines". That list adds up to 16x8 + 6x4 +
// 16x1 = 168 GPUs, not 256, and the paper says no more (no rack size
// either). Every result the paper reports for the simulator refers to 256
// GPUs, and contention (Figure 14 halves and quarters "the original size")
// is relative to it, so:
//
//   - themis is the footnote's machine shapes in the footnote's proportions
//     at the stated 256 GPUs: 24 8-GPU + 10 4-GPU + 24 1-GPU machines
//     (192 + 40 + 24 GPUs; the footnote's GPU shares are 76% / 14% / 10%,
//     these 75% / 16% / 9%). Scaling the 16 : 6 : 16 machine counts by
//     256/168 gives 24.4 : 9.1 : 24.4; we round to 24 and 24 and take the
//     4-GPU machines that make exactly 256 (10).
//   - themis-footnote is the footnote's list as printed: 16 + 6 + 16
//     machines, 168 GPUs.
//
// Both put each machine shape in racks of its own of 64 GPUs (our
// assumption, as for philly: 8 8-GPU machines, up to 16 4-GPU or 64 1-GPU
// machines a rack): themis has 3 + 1 + 1 racks, themis-footnote 2 + 1 + 1.
// Inside a machine the only level is the slot: a GPU's Path is ["slot<k>"]
// (ThemisSlotPath), slots of 2 GPUs on 8-GPU machines, of 1 GPU on 4-GPU
// machines, and one slot on 1-GPU machines. With the node and the rack this
// is the paper's four levels: GPU, slot, machine, rack. The machines account
// GPUs only (the paper gives no CPU or memory). Themis builds the shape at
// any machine counts.
package cluster
