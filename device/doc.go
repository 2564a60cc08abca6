// Package device is themis's Nomad device plugin: it shows a node's GPUs to
// Nomad, with their place in the node's topology, so that the planner can
// rebuild the cluster's physical cells (rack > node > socket > PCIe switch >
// NVLink pair > GPU) from Nomad's node fingerprints alone.
//
// # Backends
//
// A Backend discovers the GPUs of one node:
//
//   - "sim" reads a topology file (package topology) and reports the GPUs of
//     one of its nodes (the "node" option, or the file's only node). The file
//     is re-read on every fingerprint, so an operator marks a GPU bad by adding
//     healthy = false to its gpu block. Reserve mounts nothing, and stats
//     report the GPU's memory with nothing used, flagged as simulated.
//   - "nvml" is the seam for real GPUs through go-nvml; it is not built yet
//     and selecting it fails with ErrNVMLNotBuilt (see Backend).
//
// # Configuration
//
//	plugin "themis-device" {
//	  config {
//	    backend            = "sim"                       # default
//	    topology_file      = "/etc/themis/topology.hcl"  # required for sim
//	    node               = "dev-node"                  # default: the file's only node
//	    fingerprint_period = "10s"                       # default
//	  }
//	}
//
// # Fingerprint
//
// GPUs are grouped per model: vendor "themis", type "gpu", name the model, so
// a job asks for device "themis/gpu" (any model) or "themis/gpu/<model>".
// Each instance's ID is the GPU's ID, with its health and, when known, its PCI
// bus ID. Nomad keeps attributes per group, not per instance; each group
// carries (names exported from package topology):
//
//	model          string  topology.AttrModel
//	memory         int MiB topology.AttrMemory (smallest GPU of the group)
//	backend        string  topology.AttrBackend ("sim" or "nvml")
//	topology_node  string  topology.AttrTopologyNode (node name in the topology)
//	rack           string  topology.AttrRack
//	layout         string  topology.AttrLayout
//
// A new fingerprint is sent only when something changed. A failing backend
// is reported on the stream (Nomad then stops the plugin), except that up to
// two failures in a row after a good fingerprint are only logged, so that a
// topology file caught mid-edit does not take the node's GPUs away.
//
// # Layout encoding
//
// The layout attribute carries each GPU's index, ID and topology path:
// "index:id:path" entries sorted by index and joined by ';', the path's cells
// outermost first joined by '/', e.g.
//
//	0:SIM-dev-node-0:socket0/switch0/pair0;1:SIM-dev-node-1:socket0/switch0/pair0
//
// topology.EncodeLayout writes it and topology.DecodeLayout reads it back
// into []topology.LayoutEntry. IDs and cell names never hold ':', ';', ',',
// or whitespace (cell names not '=' either), so no escaping is needed.
//
// # Reserve
//
// Reserving GPUs sets NVIDIA_VISIBLE_DEVICES and THEMIS_GPU_IDS to their IDs
// and CUDA_VISIBLE_DEVICES to their node-local indexes, comma-joined in the
// order Nomad gives them. An unknown ID is an error naming it.
package device
