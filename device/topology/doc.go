// Package topology reads themis topology files (HCL: nodes, their rack,
// and each GPU's index, model, memory, cell path and health) and encodes
// GPU layouts for Nomad device attributes. It does no I/O beyond reading
// the file.
//
// Parse reports every problem at once, each naming the field, the value
// and the file:line; EncodeLayout and DecodeLayout carry the GPUs' index,
// ID and path through a device group attribute (AttrLayout). The file
// format and the layout encoding: docs/nvml.md, "Topology files".
package topology
