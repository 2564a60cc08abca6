package device

import nomaddevice "github.com/hashicorp/nomad/plugins/device"

// FingerprintGroups are the device groups the plugin's fingerprint sends
// for inv, as backend (BackendSim, BackendNVML) fingerprinted it: one group
// per GPU model, with the themis attributes (model, memory, backend,
// topology_node, rack, layout). The node simulator (e2e/nodesim) registers
// its nodes with exactly these, so the planner reads a simulated node as it
// reads a real one.
func FingerprintGroups(inv *Inventory, backend string) []*nomaddevice.DeviceGroup {
	return deviceGroups(inv, backend)
}
