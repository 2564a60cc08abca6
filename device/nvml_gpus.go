//go:build linux && cgo

package device

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/themis-nomad/themis/device/topology"
)

// affinityWords is how many 64-bit words of CPU affinity mask are asked
// for: 4096 CPUs.
const affinityWords = 64

// physGPU is one physical GPU as NVML reports it.
type physGPU struct {
	index     int
	dev       nvml.Device // nil when its handle could not be had
	uuid      string
	model     string
	memoryMiB int64
	// read says which of uuid, model, memoryMiB NVML gave this time.
	uuidRead, modelRead, memoryRead bool
	busID                           string // as NVML writes it
	addr                            pciAddress
	addrOK                          bool
	minor                           int // -1 when unknown
	numa                            int
	numaOK                          bool
	cpus                            string // CPU affinity mask, when the NUMA node is unknown
	// problem is the first NVML call on the GPU that failed (the GPU is then
	// unhealthy), empty when none did.
	problem string
	mig     bool // MIG mode is on: the GPU is shown as its instances
	migs    []migDevice
}

// migDevice is one MIG instance of a GPU.
type migDevice struct {
	dev       nvml.Device
	uuid      string
	model     string
	memoryMiB int64
	gi, ci    int
	problem   string
}

// Fingerprint enumerates the node's GPUs: each GPU (or, with MIG on, each
// of its MIG instances) with its place in the cell tree built from the
// GPUs' pairwise links, and its health from NVML calls and events.
func (b *nvmlBackend) Fingerprint(ctx context.Context) (*Inventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	inv := &Inventory{Node: b.node, Rack: b.rack}
	if !b.initLocked() {
		b.devices = nil
		return inv, nil
	}
	n, ret := b.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, errNVML("DeviceGetCount", ret)
	}
	gpus := make([]physGPU, n)
	for i := range gpus {
		gpus[i] = b.rememberLocked(b.probe(i))
	}
	paths := cellPaths(n, newLinker(gpus).link, func(members []int) (int, bool) { return sharedNUMA(gpus, members) })
	b.watchLocked(gpus)

	now := b.now()
	inv.Access = map[string]Access{}
	inv.SharedDeviceNodes = b.files.shared()
	var devices, migDevices []statDevice
	var migGPUs []topology.GPU
	migGI := map[string]map[int][]string{}
	next := n // MIG instances are numbered after the GPUs
	for i, g := range gpus {
		healthy, desc := b.health.check(g.uuid, now)
		if g.problem != "" {
			healthy, desc = false, g.problem
		}
		if !g.mig {
			inv.GPUs = append(inv.GPUs, topology.GPU{
				Index: g.index, ID: g.uuid, Model: g.model, MemoryMiB: g.memoryMiB, Path: paths[i],
				Healthy: healthy, HealthDescription: desc, PCIBusID: g.busID,
			})
			inv.Access[g.uuid] = Access{CUDAName: g.uuid, DeviceNodes: b.gpuFiles(g)}
			if g.dev != nil {
				devices = append(devices, statDevice{id: g.uuid, model: g.model, dev: g.dev})
			}
			continue
		}
		parent := fmt.Sprintf("gpu%d", g.index)
		if paths[i] != "" {
			parent = paths[i] + topology.PathSeparator + parent
		}
		for _, m := range g.migs {
			mHealthy, mDesc := healthy, desc
			if mHealthy && m.problem != "" {
				mHealthy, mDesc = false, m.problem
			}
			if mHealthy {
				mHealthy, mDesc = b.health.check(m.uuid, now)
			}
			if migGI[g.uuid] == nil {
				migGI[g.uuid] = map[int][]string{}
			}
			migGI[g.uuid][m.gi] = append(migGI[g.uuid][m.gi], m.uuid)
			migGPUs = append(migGPUs, topology.GPU{
				Index: next, ID: m.uuid, Model: m.model, MemoryMiB: m.memoryMiB, Path: parent,
				Healthy: mHealthy, HealthDescription: mDesc, PCIBusID: g.busID,
			})
			next++
			var files []string
			if g.minor >= 0 {
				files = b.files.mig(g.minor, m.gi, m.ci)
			}
			inv.Access[m.uuid] = Access{CUDAName: m.uuid, DeviceNodes: files}
			migDevices = append(migDevices, statDevice{id: m.uuid, model: m.model, dev: m.dev, mig: true})
		}
	}
	inv.GPUs = append(inv.GPUs, migGPUs...) // sorted by index: MIG instances come last
	b.devices = append(devices, migDevices...)
	b.migGI = migGI
	return inv, nil
}

func (b *nvmlBackend) gpuFiles(g physGPU) []string {
	if g.minor < 0 {
		return nil
	}
	return b.files.gpu(g.minor)
}

// probe reads what NVML tells of GPU i. A failing call the GPU cannot do
// without (handle, UUID, name, memory, PCI info) is its problem; the NUMA
// node, CPU affinity, minor number and MIG calls are optional.
func (b *nvmlBackend) probe(i int) physGPU {
	g := physGPU{index: i, uuid: fmt.Sprintf("nvml-gpu%d", i), model: "unknown", memoryMiB: 1, minor: -1}
	fail := func(call string, ret nvml.Return) {
		if g.problem == "" {
			g.problem = errNVML(call, ret).Error()
		}
	}
	dev, ret := b.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		fail("DeviceGetHandleByIndex", ret)
		return g
	}
	g.dev = dev
	if uuid, ret := dev.GetUUID(); ret != nvml.SUCCESS {
		fail("GetUUID", ret)
	} else if err := topology.ValidateID(uuid); err != nil {
		g.problem = "NVML GetUUID: " + err.Error()
	} else {
		g.uuid, g.uuidRead = uuid, true
	}
	if name, ret := dev.GetName(); ret == nvml.SUCCESS {
		g.model, g.modelRead = modelName(name), true
	} else {
		fail("GetName", ret)
	}
	if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS && mem.Total >= 1<<20 {
		g.memoryMiB, g.memoryRead = int64(mem.Total>>20), true
	} else if ret != nvml.SUCCESS {
		fail("GetMemoryInfo", ret)
	}
	if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		g.busID = cString(pci.BusId[:])
		if a, err := parsePCIAddress(g.busID); err == nil {
			g.addr, g.addrOK = a, true
		} else {
			g.busID = ""
		}
	} else {
		fail("GetPciInfo", ret)
	}
	if minor, ret := dev.GetMinorNumber(); ret == nvml.SUCCESS && minor >= 0 {
		g.minor = minor
	}
	if numa, ret := dev.GetNumaNodeId(); ret == nvml.SUCCESS && numa >= 0 {
		g.numa, g.numaOK = numa, true
	} else if mask, ret := dev.GetCpuAffinity(affinityWords); ret == nvml.SUCCESS {
		g.cpus = fmt.Sprint(mask)
	}
	if mode, _, ret := dev.GetMigMode(); ret == nvml.SUCCESS && mode == nvml.DEVICE_MIG_ENABLE {
		g.mig = true
		g.migs = b.probeMIG(dev, &g)
	}
	return g
}

// rememberLocked keeps what a good probe of a GPU read, and fills in what
// a failing one could not from the last good one of the same index, so a
// GPU that starts failing keeps its ID (the planner sees it go bad rather
// than vanish), model and memory.
func (b *nvmlBackend) rememberLocked(g physGPU) physGPU {
	if g.uuidRead && g.modelRead && g.memoryRead {
		b.known[g.index] = gpuIdentity{uuid: g.uuid, model: g.model, memoryMiB: g.memoryMiB}
		return g
	}
	k, ok := b.known[g.index]
	if !ok || (g.uuidRead && g.uuid != k.uuid) {
		return g // never seen whole, or another GPU now sits at this index
	}
	g.uuid = k.uuid
	if !g.modelRead {
		g.model = k.model
	}
	if !g.memoryRead {
		g.memoryMiB = k.memoryMiB
	}
	return g
}

// probeMIG lists the MIG instances of a GPU with MIG mode on.
func (b *nvmlBackend) probeMIG(dev nvml.Device, g *physGPU) []migDevice {
	count, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		if g.problem == "" {
			g.problem = errNVML("GetMaxMigDeviceCount", ret).Error()
		}
		return nil
	}
	var migs []migDevice
	for k := range count {
		h, ret := dev.GetMigDeviceHandleByIndex(k)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // no instance in this slot
		}
		if ret != nvml.SUCCESS {
			if g.problem == "" {
				g.problem = errNVML(fmt.Sprintf("GetMigDeviceHandleByIndex(%d)", k), ret).Error()
			}
			continue
		}
		m := migDevice{dev: h, model: g.model + " MIG", memoryMiB: 1}
		fail := func(call string, ret nvml.Return) {
			if m.problem == "" {
				m.problem = errNVML(call, ret).Error()
			}
		}
		uuid, ret := h.GetUUID()
		if ret != nvml.SUCCESS || topology.ValidateID(uuid) != nil {
			b.logger.Warn("MIG instance without a usable UUID is left out", "gpu", g.uuid, "slot", k, "error", nvmlError(ret))
			continue
		}
		m.uuid = uuid
		if name, ret := h.GetName(); ret == nvml.SUCCESS {
			m.model = modelName(name)
		} else {
			fail("GetName", ret)
		}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS && mem.Total >= 1<<20 {
			m.memoryMiB = int64(mem.Total >> 20)
		} else if ret != nvml.SUCCESS {
			fail("GetMemoryInfo", ret)
		}
		if gi, ret := h.GetGpuInstanceId(); ret == nvml.SUCCESS {
			m.gi = gi
		}
		if ci, ret := h.GetComputeInstanceId(); ret == nvml.SUCCESS {
			m.ci = ci
		}
		migs = append(migs, m)
	}
	if len(migs) == 0 {
		b.logger.Warn("GPU has MIG mode on but no MIG instances: it offers nothing to schedule", "gpu", g.uuid)
	}
	return migs
}

// sharedNUMA returns the NUMA node all members share, when they do.
func sharedNUMA(gpus []physGPU, members []int) (int, bool) {
	if len(members) == 0 || !gpus[members[0]].numaOK {
		return 0, false
	}
	numa := gpus[members[0]].numa
	for _, m := range members[1:] {
		if !gpus[m].numaOK || gpus[m].numa != numa {
			return 0, false
		}
	}
	return numa, true
}
