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
//     healthy = false to its gpu block. Reserve lists no device files, and stats
//     report the GPU's memory with nothing used, flagged as simulated.
//   - "nvml" reports the node's real GPUs through NVML
//     (github.com/NVIDIA/go-nvml, nvml*.go, built with cgo on Linux; see
//     "The nvml backend" below). Where NVML is absent (no driver, no
//     libnvidia-ml.so.1, or a binary built without cgo) it logs one line
//     saying so and reports no GPUs; the client runs on. The library is
//     opened only when this backend is selected: "sim" never touches it.
//
// # Configuration
//
//	plugin "themis-device" {
//	  config {
//	    backend            = "sim"                       # default
//	    topology_file      = "/etc/themis/topology.hcl"  # required for sim
//	    node               = "dev-node"                  # default: the file's only node
//	    fingerprint_period = "10s"                       # default
//	    rack               = "rack0"                     # nvml: the node's rack (default rack0)
//	    xid_recovery       = "30m"                       # nvml: default "" (never)
//	  }
//	}
//
// For nvml, node is the node's name in the topology (default: the host
// name) and topology_file is not used.
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
//	memory         int MiB topology.AttrMemory (smallest healthy GPU of the group)
//	backend        string  topology.AttrBackend ("sim" or "nvml")
//	topology_node  string  topology.AttrTopologyNode (node name in the topology)
//	rack           string  topology.AttrRack
//	layout         string  topology.AttrLayout
//
// A new fingerprint is sent only when something changed; a backend that
// learns of a change between periods (the nvml backend, from an XID) has
// the node fingerprinted at once. A failing backend
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
// and CUDA_VISIBLE_DEVICES to their node-local indexes (simulated GPUs) or
// UUIDs (NVML GPUs and MIG instances: CUDA's own order need not be NVML's),
// comma-joined in the order Nomad gives them. For NVML GPUs it also lists
// the device files a container driver mounts: /dev/nvidia<minor> per GPU,
// a MIG instance's /dev/nvidia-caps/nvidia-cap<N> (from the driver's
// /proc/driver/nvidia/capabilities), and /dev/nvidiactl, /dev/nvidia-uvm,
// /dev/nvidia-uvm-tools, /dev/nvidia-modeset; only files present on the
// host. An unknown ID is an error naming it.
//
// These files are the fence, not the environment: Nomad hands them to the
// task's driver (TaskConfig.Devices), and the themis driver allows the task
// only them (plus runc's default /dev/null, zero, random, ... and the
// operator's allow_devices) in a device cgroup, the cgroups v1 devices
// controller or a v2 eBPF device program, so opening another GPU's
// /dev/nvidiaN, or another MIG instance's capability file, fails with
// EPERM (driver/doc.go, "GPU device isolation"). Nomad's exec driver
// allows the same list, docker passes them as --device; raw_exec fences
// nothing. A file made after the task started (nvidia-uvm is made by
// nvidia-modprobe the first time CUDA runs) is not in its list: load the
// NVIDIA modules, nvidia-uvm included, when the node boots. The simulated
// backend has no device files, so its tasks may open no GPU file at all.
//
// With checkpoint_root set (the themis driver's, with consul_address and
// consul_token to read the GPU leases), Reserve also mounts the dir of the
// job the GPUs are leased to, <checkpoint_root>/.themis/jobs/<ns>/<job>,
// at /themis-checkpoints: an exec or docker themis task sees its own job's
// checkpoints and no other job's (ckptmount.go; the planner's pin points
// THEMIS_CHECKPOINT_DIR into it). On the host the dirs above it are root's
// and 0700, so no other job's task reaches it by its path.
//
// # The nvml backend
//
// Each fingerprint asks NVML for every GPU: UUID (the device ID), name (the
// model, '/' made '-'), memory, PCI bus ID, minor number, NUMA node
// (DeviceGetNumaNodeId, else the CPU affinity mask) and MIG mode. Then, for
// every pair, the link between them, closest first (type Link):
//
//	NVLink           P2P status with the NVLINK cap is OK; where that call is
//	                 unsupported, an active NVLink of one reaches the other's
//	                 PCI address, or both reach an NVSwitch
//	INTERNAL         board      one multi-GPU board
//	SINGLE           switch     one PCIe switch
//	MULTIPLE         switches   several PCIe switches
//	HOSTBRIDGE       bridge     one host bridge
//	NODE             socket     one CPU socket / NUMA node
//	SYSTEM           -          across sockets, or unknown
//
// (DeviceGetTopologyCommonAncestor gives the PCIe levels; where it fails,
// the same NUMA node is "socket". GPUs on different known NUMA nodes are
// never closer than SYSTEM over PCIe.) cellPaths turns the links into
// cells by single linkage: at each level, GPUs that reach each other
// through that link or a closer one (transitively) are one cell, so the
// cells nest into a tree. A cell of one GPU or of the whole node is left
// out; levels that group the same GPUs are one cell named after the most
// telling (nvlink, socket, switch, board, bridge, switches). Cells are
// numbered across the node in the order of their lowest GPU; sockets by
// their NUMA node when that numbers them apart. So:
//
//	DGX/HGX (NVSwitch)           one NVLink domain: the node itself, path ""
//	PCIe box, 2 sockets x        socket0/switch0, socket0/switch1,
//	  2 switches x 2 GPUs        socket1/switch2, socket1/switch3
//	the same with NVLink bridges socket0/nvlink0, ...
//
// MIG: a GPU with MIG mode on is not a device itself; each of its MIG
// instances is, with the instance's UUID, name ("... MIG 1g.10gb": one
// device group per profile), memory, and path the GPU's path plus the cell
// "gpu<index>", so the planner places instances as leaves under their GPU.
// Instances are numbered after the node's GPUs.
//
// Health: a GPU is unhealthy, with a HealthDescription, while an NVML call
// it cannot do without fails (GPU lost, ...), and after a critical XID or a
// double-bit ECC error from the NVML event set (application XIDs 13, 31,
// 43, 45, 68, 109 are ignored), until xid_recovery has passed with no other
// (never, by default). A MIG instance is unhealthy when its GPU is; an
// event inside one GPU instance marks only that instance's MIG devices. The
// planner reads an unhealthy GPU's cells as bad (HiveD's bad cells).
//
// Stats: memory used and total per GPU and MIG instance; for whole GPUs
// also utilisation (kernel and memory, %), temperature (C) and power (W).
// A measurement NVML does not support is left out.
package device
