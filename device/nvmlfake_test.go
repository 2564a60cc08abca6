//go:build linux && cgo

package device

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeMachine describes a node for a fake NVML built on go-nvml's mock
// server (mock/dgxh100's, whose topology, NVLink, NUMA, power, utilisation,
// event and MIG-device calls are unset and panic): fakeNVML fills them in.
type fakeMachine struct {
	gpus []gpus.Config
	// ancestor is the PCIe common ancestor of GPUs i < j.
	ancestor func(i, j int) nvml.GpuTopologyLevel
	// numa is GPU i's NUMA node; nil: NUMA not supported, CPU affinity
	// the same for all.
	numa func(i int) int
	// p2pNVLink says whether GPUs i < j talk over NVLink by P2P status; nil:
	// the P2P call is not supported.
	p2pNVLink func(i, j int) bool
	// nvswitchLinks is how many active NVLinks each GPU has to NVSwitches
	// (0: none, and the NVLink calls are not supported).
	nvswitchLinks int
	// mig lists, per GPU, the MIG instances' profile names; a GPU with any
	// has MIG mode on.
	mig map[int][]string
	// lost GPUs answer GetMemoryInfo with ERROR_GPU_IS_LOST.
	lost map[int]bool
}

// fakeNVML is a fake NVML library for one machine, with an event channel a
// test sends XIDs on.
type fakeNVML struct {
	*server.Server
	events chan nvml.EventData
	mu     sync.Mutex
	// registered is the event mask each GPU index registered.
	registered map[int]uint64
	// waitedRegistrations counts registrations that had to wait for a
	// Wait on their event set to end.
	waitedRegistrations int
	// registerTakes is how long a registration takes: long enough, in a
	// test, for a watcher started before it to be waiting already.
	registerTakes time.Duration
	// waiting is held while an event set's Wait runs.
	waiting sync.Mutex
}

// register models an event registration on the real library (seen on an
// H200 with driver 580, docs/nvml.md): it waits while any nvmlEventSetWait
// is in progress, on whichever event set.
func (f *fakeNVML) register() {
	time.Sleep(f.registerTakes)
	if !f.waiting.TryLock() {
		f.mu.Lock()
		f.waitedRegistrations++
		f.mu.Unlock()
		f.waiting.Lock()
	}
	f.waiting.Unlock()
}

// fakeUUID is GPU i's UUID in the fakes.
func fakeUUID(i int) string { return fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i) }

// fakeMIGUUID is the UUID of MIG instance k of GPU i.
func fakeMIGUUID(i, k int) string { return fmt.Sprintf("MIG-00000000-0000-0000-%04d-%012d", i, k) }

// fakeBusID is GPU i's PCI bus ID.
func fakeBusID(i int) string { return fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x08) }

func newFakeNVML(m fakeMachine) *fakeNVML {
	f := &fakeNVML{
		Server:     dgxh100.NewWithGPUs(m.gpus...),
		events:     make(chan nvml.EventData, 16),
		registered: map[int]uint64{},
	}
	f.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				f.waiting.Lock()
				defer f.waiting.Unlock()
				select {
				case e := <-f.events:
					return e, nvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	index := map[nvml.Device]int{}
	for i, d := range f.Devices {
		index[d] = i
	}
	for i, d := range f.Devices {
		f.fillDevice(m, i, d.(*server.Device), index)
	}
	return f
}

func (f *fakeNVML) fillDevice(m fakeMachine, i int, d *server.Device, index map[nvml.Device]int) {
	d.UUID, d.PciBusID = fakeUUID(i), fakeBusID(i)
	d.MemoryInfo.Used = uint64(i) << 30 // i GiB in use
	d.GetNameFunc = func() (string, nvml.Return) { return d.Config.Name, nvml.SUCCESS }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for k, c := range d.PciBusID {
			p.BusId[k] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	if m.lost[i] {
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	}
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) {
		if m.numa == nil {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return m.numa(i), nvml.SUCCESS
	}
	d.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return []uint{0xffff}, nvml.SUCCESS }
	pair := func(other nvml.Device) (int, int) {
		j := index[other]
		return min(i, j), max(i, j)
	}
	d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		return m.ancestor(pair(other)), nvml.SUCCESS
	}
	d.GetP2PStatusFunc = func(other nvml.Device, caps nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
		if m.p2pNVLink == nil || caps != nvml.P2P_CAPS_INDEX_NVLINK {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		if m.p2pNVLink(pair(other)) {
			return nvml.P2P_STATUS_OK, nvml.SUCCESS
		}
		return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
	}
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link >= m.nvswitchLinks {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: uint32(10 * i), Memory: uint32(5 * i)}, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return uint32(40 + i), nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(100_000 + 500*i), nvml.SUCCESS }
	d.RegisterEventsFunc = func(mask uint64, _ nvml.EventSet) nvml.Return {
		f.register()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.registered[i] = mask
		return nvml.SUCCESS
	}
	migs := m.mig[i]
	if len(migs) > 0 {
		d.MigMode = nvml.DEVICE_MIG_ENABLE
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(k int) (nvml.Device, nvml.Return) {
		if k >= len(migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return fakeMIGDevice(d, i, k, migs[k]), nvml.SUCCESS
	}
}

// fakeMIGDevice is MIG instance k (GPU instance k+1, compute instance 0) of
// GPU i, with the given profile ("1g.5gb"): its memory is the profile's.
func fakeMIGDevice(parent *server.Device, i, k int, profile string) nvml.Device {
	var gb uint64
	_, _ = fmt.Sscanf(profile[3:], "%dgb", &gb)
	return &mock.Device{
		GetUUIDFunc:                            func() (string, nvml.Return) { return fakeMIGUUID(i, k), nvml.SUCCESS },
		GetNameFunc:                            func() (string, nvml.Return) { return parent.Config.Name + " MIG " + profile, nvml.SUCCESS },
		GetMemoryInfoFunc:                      func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: gb << 30, Used: 1 << 30}, nvml.SUCCESS },
		GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return k + 1, nvml.SUCCESS },
		GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
		GetUtilizationRatesFunc:                func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED },
		GetTemperatureFunc:                     func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		GetPowerUsageFunc:                      func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS },
	}
}

// sendXID delivers an XID event on GPU i.
func (f *fakeNVML) sendXID(i int, xid uint64) {
	f.events <- nvml.EventData{Device: f.Devices[i], EventType: nvml.EventTypeXidCriticalError, EventData: xid,
		GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
}

// sendMIGXID delivers an XID event inside GPU instance gi of GPU i.
func (f *fakeNVML) sendMIGXID(i int, gi uint32, xid uint64) {
	f.events <- nvml.EventData{Device: f.Devices[i], EventType: nvml.EventTypeXidCriticalError, EventData: xid,
		GpuInstanceId: gi, ComputeInstanceId: 0}
}

// The machines of the tests.

// dgxH100 is a DGX H100: 8 H100s on one NVSwitch fabric (18 NVLinks each,
// P2P status not supported so the NVLink calls are used), two sockets of
// four GPUs, each GPU behind its own PCIe switch.
func dgxH100() fakeMachine {
	return fakeMachine{
		gpus: gpus.Multiple(8, gpus.H100_SXM5_80GB),
		ancestor: func(i, j int) nvml.GpuTopologyLevel {
			if i/4 == j/4 {
				return nvml.TOPOLOGY_NODE
			}
			return nvml.TOPOLOGY_SYSTEM
		},
		numa:          func(i int) int { return i / 4 },
		nvswitchLinks: 18,
	}
}

// pcieBox is an 8-GPU PCIe server: two sockets, two PCIe switches of two
// GPUs each per socket, no NVLink.
func pcieBox() fakeMachine { return pcieBoxOf(2) }

// pcieBoxOf is a PCIe server of two sockets, two PCIe switches per socket
// and perSwitch GPUs per switch, no NVLink.
func pcieBoxOf(perSwitch int) fakeMachine {
	perSocket := 2 * perSwitch
	return fakeMachine{
		gpus: gpus.Multiple(2*perSocket, gpus.A100_PCIE_40GB),
		ancestor: func(i, j int) nvml.GpuTopologyLevel {
			switch {
			case i/perSwitch == j/perSwitch:
				return nvml.TOPOLOGY_SINGLE
			case i/perSocket == j/perSocket:
				return nvml.TOPOLOGY_HOSTBRIDGE
			}
			return nvml.TOPOLOGY_SYSTEM
		},
		numa:      func(i int) int { return i / perSocket },
		p2pNVLink: func(i, j int) bool { return false },
	}
}

// h200VM is the machine of the real-GPU run of 2026-11-28 (docs/nvml.md,
// "On a real GPU"): one H200 passed through to a Firecracker VM, named
// plainly "NVIDIA H200" with 143771 MiB, whose NUMA node call is not
// supported (CPU affinity answers), with no NVLink (link 0 not supported).
func h200VM() fakeMachine {
	c := gpus.H200_SXM5_141GB
	c.Name, c.MemoryMB = "NVIDIA H200", 143771
	return fakeMachine{
		gpus:     []gpus.Config{c},
		ancestor: func(i, j int) nvml.GpuTopologyLevel { return nvml.TOPOLOGY_SYSTEM },
	}
}

// nvlinkPairs is pcieBox with an NVLink bridge on each switch's two GPUs.
func nvlinkPairs() fakeMachine {
	m := pcieBox()
	m.p2pNVLink = func(i, j int) bool { return i/2 == j/2 }
	return m
}

// migA100 is two A100s on one PCIe switch, no NUMA information: GPU 0 has
// MIG on with three instances, GPU 1 is whole.
func migA100() fakeMachine {
	return fakeMachine{
		gpus:     gpus.Multiple(2, gpus.A100_SXM4_40GB),
		ancestor: func(i, j int) nvml.GpuTopologyLevel { return nvml.TOPOLOGY_SINGLE },
		mig:      map[int][]string{0: {"3g.20gb", "2g.10gb", "1g.5gb"}},
	}
}

// unhealthyBox is pcieBox with GPU 5 fallen off the bus.
func unhealthyBox() fakeMachine {
	m := pcieBox()
	m.lost = map[int]bool{5: true}
	return m
}
