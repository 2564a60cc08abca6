// Package device is themis's Nomad device plugin (binary themis-device): it
// shows a node's GPUs to Nomad as device "themis/gpu/<model>", with their
// place in the node's topology in a layout attribute, so that the planner
// rebuilds the cluster's physical cells (rack > node > socket > PCIe
// switch > NVLink pair > GPU) from Nomad's node fingerprints alone.
//
// NewPlugin is the plugin; a Backend finds the GPUs: "sim" reads a topology
// file (package topology), "nvml" asks the node's real GPUs through NVML
// and, where NVML is absent, runs on reporting none. Reserve sets the CUDA
// and themis environment and lists the GPUs' device files, to which the
// themis driver fences tasks. Config, fingerprint, layout, Reserve, health
// and stats: docs/nvml.md, "The device plugin in full".
package device
