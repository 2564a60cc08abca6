//go:build linux && cgo

package device

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/themis-nomad/themis/device/topology"
)

// TestRealGPU fingerprints this machine's GPUs through the real
// libnvidia-ml and checks them against nvidia-smi. It skips where NVML
// cannot be loaded (no driver, as in CI). On a GPU machine, without Go:
//
//	go test -c -o themis-device-gpu.test ./device/   # where Go is
//	./themis-device-gpu.test -test.run 'RealGPU' -test.v
//
// With THEMIS_GPU_REPORT=file it also writes the fingerprint beside
// `nvidia-smi topo -m` to that file, for docs/nvml.md.
func TestRealGPU(t *testing.T) {
	if ret := nvml.New().Init(); ret != nvml.SUCCESS {
		t.Skipf("NVML is not available here (%s): no GPU to test", nvmlAbsence(ret))
	}
	lib := nvml.New()
	b, err := newNVMLBackend(Config{}, lib, testLogger(t), deviceFiles{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	inv, err := b.Fingerprint(context.Background())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		t.Fatal(errNVML("DeviceGetCount", ret))
	}
	start = time.Now()
	if _, err := b.Fingerprint(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := time.Since(start)
	var report strings.Builder
	fmt.Fprintf(&report, "fingerprint of %d GPU(s) took %s, the next one %s\n\n", count, took, again)
	if count > 0 {
		start = time.Now()
		registerTimes(t, lib, &report)
		fmt.Fprintf(&report, "(the registration measurements, event sets freed, took %s)\n\n", time.Since(start))
	}
	fmt.Fprintf(&report, "| index | id | model | memory MiB | path | healthy | PCI bus |\n|---|---|---|---|---|---|---|\n")
	for _, g := range inv.GPUs {
		fmt.Fprintf(&report, "| %d | %s | %s | %d | %s | %v %s | %s |\n", g.Index, g.ID, g.Model, g.MemoryMiB, g.Path, g.Healthy, g.HealthDescription, g.PCIBusID)
		if !strings.HasPrefix(g.ID, "GPU-") && !strings.HasPrefix(g.ID, "MIG-") {
			t.Errorf("GPU %d id %q is not an NVML UUID", g.Index, g.ID)
		}
		if g.MemoryMiB <= 1 || g.Model == "unknown" || g.PCIBusID == "" || !g.Healthy {
			t.Errorf("GPU %d = %+v", g.Index, g)
		}
	}
	if count > 0 && len(inv.GPUs) == 0 {
		t.Errorf("NVML sees %d GPUs, the fingerprint none", count)
	}
	for _, group := range deviceGroups(inv, BackendNVML) {
		if _, err := topology.DecodeLayout(*group.Attributes[topology.AttrLayout].String); err != nil {
			t.Errorf("group %s: %v", group.Name, err)
		}
	}
	start = time.Now()
	stats, err := b.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&report, "\nstats sample took %s", time.Since(start))
	for _, s := range stats {
		fmt.Fprintf(&report, "\nstats %s: memory %d/%d MiB", s.ID, s.MemoryUsedMiB, s.MemoryTotalMiB)
		for name, v := range map[string]*int64{"util %": s.UtilizationPct, "temp C": s.TemperatureC} {
			if v != nil {
				fmt.Fprintf(&report, ", %s %d", name, *v)
			}
		}
		if s.PowerW != nil {
			fmt.Fprintf(&report, ", power %.1f W", *s.PowerW)
		}
		if s.MemoryTotalMiB <= 0 {
			t.Errorf("stats %s: no memory total", s.ID)
		}
	}
	fmt.Fprintf(&report, "\n\nhealth events watched:")
	for _, g := range inv.GPUs {
		if w, ok := b.watching()[g.ID]; ok {
			fmt.Fprintf(&report, " %s: %q;", g.ID, w)
		}
	}
	for _, group := range deviceGroups(inv, BackendNVML) {
		fmt.Fprintf(&report, "\n\ndevice group %s, layout attribute %q", group.Name, *group.Attributes[topology.AttrLayout].String)
	}
	probeReport(t, lib, count, &report)
	start = time.Now()
	compareNvidiaSMI(t, inv, &report)
	fmt.Fprintf(&report, "\n(nvidia-smi --query-gpu and topo -m took %s)\n", time.Since(start))
	t.Log("\n" + report.String())
	if path := os.Getenv("THEMIS_GPU_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// compareNvidiaSMI checks each whole GPU's UUID, name, memory and PCI bus
// ID against nvidia-smi's, and adds `nvidia-smi topo -m` to the report.
func compareNvidiaSMI(t *testing.T, inv *Inventory, report *strings.Builder) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Log("nvidia-smi is not on PATH: no comparison")
		return
	}
	out, err := exec.Command("nvidia-smi", "--query-gpu=index,uuid,name,memory.total,pci.bus_id",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		t.Errorf("nvidia-smi --query-gpu: %v", err)
		return
	}
	byID := map[string]topology.GPU{}
	for _, g := range inv.GPUs {
		byID[g.ID] = g
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ", ")
		if len(f) != 5 {
			t.Errorf("nvidia-smi line %q", line)
			continue
		}
		g, ok := byID[f[1]]
		if !ok {
			t.Logf("nvidia-smi GPU %s (%s) is not fingerprinted as a whole GPU (MIG on?)", f[0], f[1])
			continue
		}
		mem, _ := strconv.ParseInt(f[3], 10, 64)
		if strconv.Itoa(g.Index) != f[0] || g.Model != f[2] || mem != g.MemoryMiB || !strings.EqualFold(g.PCIBusID, f[4]) {
			t.Errorf("nvidia-smi says %q, the fingerprint %+v", line, g)
		}
	}
	topo, err := exec.Command("nvidia-smi", "topo", "-m").CombinedOutput()
	if err != nil {
		t.Logf("nvidia-smi topo -m: %v", err)
	}
	fmt.Fprintf(report, "\n\nnvidia-smi topo -m:\n\n%s", topo)
}

// probeReport writes what NVML itself answers for each GPU, return codes
// included, so that the backend's choices can be checked against the raw
// calls: versions, minor number, NUMA node, CPU affinity, MIG mode, NVLink
// links and what they reach, and the event types the GPU supports.
func probeReport(t *testing.T, lib nvml.Interface, count int, report *strings.Builder) {
	t.Helper()
	driver, _ := lib.SystemGetDriverVersion()
	nvmlVersion, _ := lib.SystemGetNVMLVersion()
	cuda, _ := lib.SystemGetCudaDriverVersion()
	fmt.Fprintf(report, "\n\nNVML %s, driver %s, CUDA driver API %d", nvmlVersion, driver, cuda)
	for i := range count {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			fmt.Fprintf(report, "\n\nGPU %d: DeviceGetHandleByIndex %s", i, nvmlError(ret))
			continue
		}
		fmt.Fprintf(report, "\n\nGPU %d raw NVML:", i)
		minor, ret := dev.GetMinorNumber()
		fmt.Fprintf(report, "\n- minor %d (%s)", minor, nvmlError(ret))
		numa, ret := dev.GetNumaNodeId()
		fmt.Fprintf(report, "\n- NUMA node %d (%s)", numa, nvmlError(ret))
		mask, ret := dev.GetCpuAffinity(affinityWords)
		nonzero := 0
		for _, w := range mask {
			if w != 0 {
				nonzero++
			}
		}
		fmt.Fprintf(report, "\n- CPU affinity: %d non-zero words of %d, first %x (%s)", nonzero, len(mask), firstWord(mask), nvmlError(ret))
		cur, pending, ret := dev.GetMigMode()
		fmt.Fprintf(report, "\n- MIG mode current %d pending %d (%s)", cur, pending, nvmlError(ret))
		mem, ret := dev.GetMemoryInfo()
		fmt.Fprintf(report, "\n- memory total %d used %d bytes (%s)", mem.Total, mem.Used, nvmlError(ret))
		events, ret := dev.GetSupportedEventTypes()
		fmt.Fprintf(report, "\n- supported events %#x: XID %v, double-bit ECC %v (%s)", events,
			events&nvml.EventTypeXidCriticalError != 0, events&nvml.EventTypeDoubleBitEccError != 0, nvmlError(ret))
		ecc, _, ret := dev.GetEccMode()
		fmt.Fprintf(report, "\n- ECC mode %d (%s)", ecc, nvmlError(ret))
		var active, switches int
		var states []string
		for link := range nvml.NVLINK_MAX_LINKS {
			state, ret := dev.GetNvLinkState(link)
			if ret != nvml.SUCCESS {
				states = append(states, fmt.Sprintf("%d:%s", link, nvmlError(ret)))
				if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
					break
				}
				continue
			}
			if state != nvml.FEATURE_ENABLED {
				states = append(states, fmt.Sprintf("%d:off", link))
				continue
			}
			active++
			if typ, ret := dev.GetNvLinkRemoteDeviceType(link); ret == nvml.SUCCESS && typ == nvml.NVLINK_DEVICE_TYPE_SWITCH {
				switches++
			}
		}
		fmt.Fprintf(report, "\n- NVLink: %d active, %d to an NVSwitch; others %v", active, switches, states)
	}
}

func firstWord(mask []uint) uint {
	if len(mask) == 0 {
		return 0
	}
	return mask[0]
}

// TestRealGPUPluginOverGRPC serves the plugin with the nvml backend over
// Nomad's gRPC device plugin transport on a real GPU machine, as a Nomad
// client runs it: fingerprint, Reserve of every GPU and one stats sample.
func TestRealGPUPluginOverGRPC(t *testing.T) {
	if ret := nvml.New().Init(); ret != nvml.SUCCESS {
		t.Skipf("NVML is not available here (%s): no GPU to test", nvmlAbsence(ret))
	}
	dp := serve(t, NewPlugin(testLogger(t)))
	if err := dp.SetConfig(agentConfig(t, `backend = "nvml"
rack = "rack9"`)); err != nil {
		t.Fatal(err)
	}
	resp := next(t, fingerprints(t, dp))
	if resp.Error != nil || len(resp.Devices) == 0 {
		t.Fatalf("fingerprint = %+v", resp)
	}
	var ids []string
	for _, g := range resp.Devices {
		if g.Vendor != "themis" || g.Type != "gpu" {
			t.Errorf("group %s/%s/%s", g.Vendor, g.Type, g.Name)
		}
		if _, err := topology.DecodeLayout(attrString(t, g, topology.AttrLayout)); err != nil {
			t.Errorf("group %s layout: %v", g.Name, err)
		}
		for _, d := range g.Devices {
			ids = append(ids, d.ID)
			t.Logf("device %s healthy %v %q locality %+v", d.ID, d.Healthy, d.HealthDesc, d.HwLocality)
			if !d.Healthy {
				t.Errorf("device %s unhealthy: %s", d.ID, d.HealthDesc)
			}
		}
	}
	res, err := dp.Reserve(ids)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reserve %v: envs %v", ids, res.Envs)
	if res.Envs[EnvCudaVisibleDevices] != strings.Join(ids, ",") {
		t.Errorf("CUDA_VISIBLE_DEVICES = %q, want the UUIDs %v", res.Envs[EnvCudaVisibleDevices], ids)
	}
	var files []string
	for _, d := range res.Devices {
		files = append(files, d.HostPath)
		if _, err := os.Stat(d.HostPath); err != nil {
			t.Errorf("reserved device file %s: %v", d.HostPath, err)
		}
	}
	t.Logf("device files %v", files)
	if !slices.Contains(files, "/dev/nvidiactl") {
		t.Errorf("device files %v lack /dev/nvidiactl", files)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stats, err := dp.Stats(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sresp := next(t, stats)
	if sresp.Error != nil || len(sresp.Groups) == 0 {
		t.Fatalf("stats = %+v", sresp)
	}
	for _, g := range sresp.Groups {
		for id, s := range g.InstanceStats {
			line := fmt.Sprintf("stats %s: %s", id, statText(s.Summary))
			for name, v := range s.Stats.Attributes {
				line += fmt.Sprintf(", %s %s", name, statText(v))
			}
			t.Log(line)
		}
	}
}

// statText writes a stat value as numbers, not pointers.
func statText(v *structs.StatValue) string {
	switch {
	case v == nil:
		return "none"
	case v.IntNumeratorVal != nil && v.IntDenominatorVal != nil:
		return fmt.Sprintf("%d/%d %s", *v.IntNumeratorVal, *v.IntDenominatorVal, v.Unit)
	case v.IntNumeratorVal != nil:
		return fmt.Sprintf("%d %s", *v.IntNumeratorVal, v.Unit)
	case v.FloatNumeratorVal != nil:
		return fmt.Sprintf("%.1f %s", *v.FloatNumeratorVal, v.Unit)
	default:
		return v.Desc
	}
}

// registerTimes measures an XID event registration of GPU 0 on an idle
// event set and on one a 1 s nvmlEventSetWait is running on (the backend
// registers before its watcher waits; see watchLocked).
func registerTimes(t *testing.T, lib nvml.Interface, report *strings.Builder) {
	t.Helper()
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		return
	}
	idle, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		fmt.Fprintf(report, "EventSetCreate: %s\n\n", nvmlError(ret))
		return
	}
	defer idle.Free()
	start := time.Now()
	ret = dev.RegisterEvents(nvml.EventTypeXidCriticalError, idle)
	onIdle := time.Since(start)
	busy, ret2 := lib.EventSetCreate()
	if ret2 != nvml.SUCCESS {
		return
	}
	defer busy.Free()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = busy.Wait(1000)
	}()
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	ret2 = dev.RegisterEvents(nvml.EventTypeXidCriticalError, busy)
	onBusy := time.Since(start)
	<-waited
	fmt.Fprintf(report, "RegisterEvents on an idle event set: %s (%s); while a 1000 ms Wait runs on it: %s (%s)\n\n",
		onIdle, nvmlError(ret), onBusy, nvmlError(ret2))
}
