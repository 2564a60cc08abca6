//go:build linux && cgo

package device

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// linker finds the Link between two GPUs of a node from NVML:
//
//  1. NVLink: P2P status with the NVLINK capability is OK, or, where that
//     call is not supported, an active NVLink of one reaches the other's
//     PCI address, or both have active NVLinks to an NVSwitch (one fabric
//     per node, as on a DGX or HGX board);
//  2. else the PCIe common ancestor (DeviceGetTopologyCommonAncestor):
//     INTERNAL board, SINGLE switch, MULTIPLE switches, HOSTBRIDGE, NODE
//     socket, SYSTEM;
//  3. where that call fails, the NUMA node (or CPU affinity): the same one
//     is LinkSocket, different ones LinkSystem. GPUs on different known
//     NUMA nodes are never closer than LinkSystem over PCIe.
type linker struct {
	gpus []physGPU
	// nvlinks[i] is GPU i's NVLink peers, read lazily.
	nvlinks []*nvlinkPeers
}

// nvlinkPeers is where a GPU's active NVLinks lead.
type nvlinkPeers struct {
	pci      map[pciAddress]bool // PCI addresses of peer GPUs
	nvswitch bool                // some link reaches an NVSwitch
}

func newLinker(gpus []physGPU) *linker {
	return &linker{gpus: gpus, nvlinks: make([]*nvlinkPeers, len(gpus))}
}

var ancestorLinks = map[nvml.GpuTopologyLevel]Link{
	nvml.TOPOLOGY_INTERNAL:   LinkBoard,
	nvml.TOPOLOGY_SINGLE:     LinkSwitch,
	nvml.TOPOLOGY_MULTIPLE:   LinkSwitches,
	nvml.TOPOLOGY_HOSTBRIDGE: LinkHostBridge,
	nvml.TOPOLOGY_NODE:       LinkSocket,
	nvml.TOPOLOGY_SYSTEM:     LinkSystem,
}

func (l *linker) link(i, j int) Link {
	a, b := l.gpus[i], l.gpus[j]
	if a.dev == nil || b.dev == nil {
		return LinkSystem
	}
	if l.nvlinked(i, j) {
		return LinkNVLink
	}
	sameNUMA, knowNUMA := false, false
	switch {
	case a.numaOK && b.numaOK:
		sameNUMA, knowNUMA = a.numa == b.numa, true
	case !a.numaOK && !b.numaOK && a.cpus != "" && b.cpus != "":
		sameNUMA, knowNUMA = a.cpus == b.cpus, true
	}
	level, ret := a.dev.GetTopologyCommonAncestor(b.dev)
	link, known := ancestorLinks[level]
	switch {
	case ret != nvml.SUCCESS || !known:
		if knowNUMA && sameNUMA {
			return LinkSocket
		}
		return LinkSystem
	case knowNUMA && !sameNUMA:
		return LinkSystem
	}
	return link
}

// nvlinked reports whether GPUs i and j talk over NVLink.
func (l *linker) nvlinked(i, j int) bool {
	a, b := l.gpus[i], l.gpus[j]
	status, ret := a.dev.GetP2PStatus(b.dev, nvml.P2P_CAPS_INDEX_NVLINK)
	if ret == nvml.SUCCESS {
		return status == nvml.P2P_STATUS_OK
	}
	pa, pb := l.peers(i), l.peers(j)
	return (pa.nvswitch && pb.nvswitch) || (b.addrOK && pa.pci[b.addr]) || (a.addrOK && pb.pci[a.addr])
}

// peers reads GPU i's active NVLinks once.
func (l *linker) peers(i int) *nvlinkPeers {
	if p := l.nvlinks[i]; p != nil {
		return p
	}
	p := &nvlinkPeers{pci: map[pciAddress]bool{}}
	l.nvlinks[i] = p
	dev := l.gpus[i].dev
	for link := range nvml.NVLINK_MAX_LINKS {
		state, ret := dev.GetNvLinkState(link)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			break // no NVLink, or no more links
		}
		if ret != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
			continue
		}
		if typ, ret := dev.GetNvLinkRemoteDeviceType(link); ret == nvml.SUCCESS && typ == nvml.NVLINK_DEVICE_TYPE_SWITCH {
			p.nvswitch = true
			continue
		}
		pci, ret := dev.GetNvLinkRemotePciInfo(link)
		if ret != nvml.SUCCESS {
			continue
		}
		if addr, err := parsePCIAddress(cString(pci.BusId[:])); err == nil {
			p.pci[addr] = true
		}
	}
	return p
}
