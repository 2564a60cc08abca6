package topology

// Names the device plugin fingerprints under, shared with the planner so it
// can find the GPUs and rebuild their topology from Nomad's node fingerprints.
// Nomad keeps attributes per device group (one group per GPU model on a
// node), not per instance; the per-instance positions travel in AttrLayout.
const (
	// Vendor is the device vendor of every group: jobs ask for
	// device "themis/gpu" (or "themis/gpu/<model>").
	Vendor = "themis"
	// DeviceType is the device type of every group.
	DeviceType = "gpu"

	// AttrModel is the GPU model name (string), equal to the group name.
	AttrModel = "model"
	// AttrMemory is the memory of each GPU in the group (int, unit MiB).
	AttrMemory = "memory"
	// AttrBackend is the backend that fingerprinted the group (string:
	// "sim" or "nvml").
	AttrBackend = "backend"
	// AttrTopologyNode is the node's name in the topology (string).
	AttrTopologyNode = "topology_node"
	// AttrRack is the rack the node sits in (string).
	AttrRack = "rack"
	// AttrLayout is EncodeLayout of the group's GPUs (string).
	AttrLayout = "layout"
)
