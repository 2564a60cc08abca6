//go:build linux && cgo

package device

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

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
	var report strings.Builder
	fmt.Fprintf(&report, "fingerprint of %d GPU(s) took %s\n\n", count, took)
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
	stats, err := b.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
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
	compareNvidiaSMI(t, inv, &report)
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
