//go:build linux && cgo

package device

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/device/topology"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: testWriter{t}})
}

// openFake builds the nvml backend on a fake machine.
func openFake(t testing.TB, m fakeMachine, cfg Config, files deviceFiles, clock *fakeClock) (*nvmlBackend, *fakeNVML) {
	t.Helper()
	f := newFakeNVML(m)
	if cfg.Node == "" {
		cfg.Node = "gpu-node"
	}
	b, err := newNVMLBackend(cfg, f, testLogger(t), files, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, f
}

// wantGPU is the part of a fingerprinted GPU a table names.
type wantGPU struct {
	index   int
	id      string
	model   string
	memMiB  int64
	path    string
	healthy bool
	health  string // a substring of the health description
}

func TestNVMLFingerprint(t *testing.T) {
	whole := func(i int, model string, mem int64, path string) wantGPU {
		return wantGPU{index: i, id: fakeUUID(i), model: model, memMiB: mem, path: path, healthy: true}
	}
	h100, a100 := "NVIDIA H100 80GB HBM3", "NVIDIA A100-PCIE-40GB"
	sockets := []string{"socket0/switch0", "socket0/switch0", "socket0/switch1", "socket0/switch1",
		"socket1/switch2", "socket1/switch2", "socket1/switch3", "socket1/switch3"}
	pcie := func() []wantGPU {
		var w []wantGPU
		for i, p := range sockets {
			w = append(w, whole(i, a100, 40960, p))
		}
		return w
	}
	tests := []struct {
		name    string
		machine fakeMachine
		want    []wantGPU
	}{
		{name: "DGX H100: one NVSwitch domain is the node", machine: dgxH100(), want: func() []wantGPU {
			var w []wantGPU
			for i := range 8 {
				w = append(w, whole(i, h100, 81920, ""))
			}
			return w
		}()},
		{name: "PCIe box: sockets and switches", machine: pcieBox(), want: pcie()},
		{name: "H200 in a VM, as run on 2026-11-28: the GPU is the node", machine: h200VM(),
			want: []wantGPU{whole(0, "NVIDIA H200", 143771, "")}},
		{name: "PCIe box: 2 switches x 4 GPUs per socket", machine: pcieBoxOf(4), want: func() []wantGPU {
			var w []wantGPU
			for i := range 16 {
				w = append(w, whole(i, a100, 40960, fmt.Sprintf("socket%d/switch%d", i/8, i/4)))
			}
			return w
		}()},
		{name: "NVLink pairs on the switches", machine: nvlinkPairs(), want: func() []wantGPU {
			w := pcie()
			for i := range w {
				w[i].path = strings.Replace(w[i].path, "switch", "nvlink", 1)
			}
			return w
		}()},
		{name: "MIG A100: instances under their GPU", machine: migA100(), want: []wantGPU{
			whole(1, "Mock NVIDIA A100-SXM4-40GB", 40960, ""),
			{index: 2, id: fakeMIGUUID(0, 0), model: "Mock NVIDIA A100-SXM4-40GB MIG 3g.20gb", memMiB: 20480, path: "gpu0", healthy: true},
			{index: 3, id: fakeMIGUUID(0, 1), model: "Mock NVIDIA A100-SXM4-40GB MIG 2g.10gb", memMiB: 10240, path: "gpu0", healthy: true},
			{index: 4, id: fakeMIGUUID(0, 2), model: "Mock NVIDIA A100-SXM4-40GB MIG 1g.5gb", memMiB: 5120, path: "gpu0", healthy: true},
		}},
		{name: "unhealthy: a GPU lost from the bus", machine: unhealthyBox(), want: func() []wantGPU {
			w := pcie()
			w[5].healthy, w[5].health, w[5].memMiB = false, "GetMemoryInfo: ERROR_GPU_IS_LOST", 1
			return w
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := openFake(t, tt.machine, Config{Rack: "rack7"}, deviceFiles{root: t.TempDir()}, newFakeClock())
			inv, err := b.Fingerprint(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if inv.Node != "gpu-node" || inv.Rack != "rack7" {
				t.Errorf("node %q rack %q", inv.Node, inv.Rack)
			}
			if len(inv.GPUs) != len(tt.want) {
				t.Fatalf("%d GPUs, want %d: %+v", len(inv.GPUs), len(tt.want), inv.GPUs)
			}
			for k, w := range tt.want {
				g := inv.GPUs[k]
				if g.Index != w.index || g.ID != w.id || g.Model != w.model || g.MemoryMiB != w.memMiB ||
					g.Path != w.path || g.Healthy != w.healthy || !strings.Contains(g.HealthDescription, w.health) ||
					(w.healthy && g.HealthDescription != "") {
					t.Errorf("GPU %d = %+v\nwant %+v", k, g, w)
				}
				if g.PCIBusID == "" {
					t.Errorf("GPU %s has no PCI bus id", g.ID)
				}
				if a := inv.Access[g.ID]; a.CUDAName != g.ID {
					t.Errorf("GPU %s CUDA name %q", g.ID, a.CUDAName)
				}
			}
			// The fingerprint round-trips through the layout attribute.
			for _, group := range deviceGroups(inv, BackendNVML) {
				entries, err := topology.DecodeLayout(*group.Attributes[topology.AttrLayout].String)
				if err != nil || len(entries) != len(group.Devices) {
					t.Errorf("group %s layout: %v, %v", group.Name, entries, err)
				}
			}
		})
	}
}

func TestNVMLHealthEvents(t *testing.T) {
	clock := newFakeClock()
	b, f := openFake(t, pcieBox(), Config{XIDRecovery: "10m"}, deviceFiles{}, clock)
	healthOf := func(i int) (bool, string) {
		t.Helper()
		inv, err := b.Fingerprint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return inv.GPUs[i].Healthy, inv.GPUs[i].HealthDescription
	}
	if ok, _ := healthOf(2); !ok {
		t.Fatal("GPU 2 unhealthy before any event")
	}
	f.mu.Lock()
	if mask := f.registered[2]; mask != healthEvents {
		t.Errorf("GPU 2 registered events %#x, want %#x", mask, uint64(healthEvents))
	}
	f.mu.Unlock()

	// An application XID leaves the GPU healthy; a critical one does not.
	f.sendXID(2, 13)
	f.sendXID(2, 79)
	waitFor(t, "GPU 2 unhealthy", func() bool { ok, _ := healthOf(2); return !ok })
	ok, desc := healthOf(2)
	if ok || !strings.Contains(desc, "XID 79 at 2026-11-24T06:00:00Z") {
		t.Errorf("GPU 2 = %v %q, want unhealthy with XID 79", ok, desc)
	}
	if ok, _ := healthOf(3); !ok {
		t.Error("GPU 3 unhealthy after an XID on GPU 2")
	}

	// Recovery: healthy once xid_recovery has passed with no other XID.
	clock.advance(9 * time.Minute)
	if ok, _ := healthOf(2); ok {
		t.Error("GPU 2 healthy before xid_recovery passed")
	}
	clock.advance(time.Minute)
	if ok, desc := healthOf(2); !ok {
		t.Errorf("GPU 2 still unhealthy after xid_recovery: %q", desc)
	}
}

func TestNVMLHealthNeverRecoversByDefault(t *testing.T) {
	clock := newFakeClock()
	b, f := openFake(t, pcieBox(), Config{}, deviceFiles{}, clock)
	if _, err := b.Fingerprint(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.sendXID(0, 48)
	waitFor(t, "GPU 0 unhealthy", func() bool { ok, _ := b.health.check(fakeUUID(0), clock.now()); return !ok })
	clock.advance(1000 * time.Hour)
	if ok, _ := b.health.check(fakeUUID(0), clock.now()); ok {
		t.Error("GPU 0 healthy again without xid_recovery")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNVMLStats(t *testing.T) {
	b, _ := openFake(t, migA100(), Config{}, deviceFiles{}, newFakeClock())
	stats, err := b.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 4 {
		t.Fatalf("%d samples, want 4 (1 GPU + 3 MIG instances): %+v", len(stats), stats)
	}
	g := stats[0]
	if g.ID != fakeUUID(1) || g.MemoryTotalMiB != 40960 || g.MemoryUsedMiB != 1024 || g.Simulated {
		t.Errorf("GPU 1 = %+v", g)
	}
	if g.UtilizationPct == nil || *g.UtilizationPct != 10 || g.MemoryUtilPct == nil || *g.MemoryUtilPct != 5 ||
		g.TemperatureC == nil || *g.TemperatureC != 41 || g.PowerW == nil || *g.PowerW != 100.5 {
		t.Errorf("GPU 1 measurements = util %v mem %v temp %v power %v", g.UtilizationPct, g.MemoryUtilPct, g.TemperatureC, g.PowerW)
	}
	m := stats[1]
	if m.ID != fakeMIGUUID(0, 0) || m.MemoryTotalMiB != 20480 || m.MemoryUsedMiB != 1024 ||
		m.UtilizationPct != nil || m.TemperatureC != nil || m.PowerW != nil {
		t.Errorf("MIG instance = %+v", m)
	}
	ds := deviceStats(g)
	for _, name := range []string{"utilization", "memory_utilization", "temperature", "power", "memory_used"} {
		if ds.Stats.Attributes[name] == nil {
			t.Errorf("stats have no %q", name)
		}
	}
}

func TestNVMLDeviceFiles(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia1",
		"/dev/nvidia-caps/nvidia-cap21", "/dev/nvidia-caps/nvidia-cap22"} {
		touch(t, filepath.Join(root, p), "")
	}
	touch(t, filepath.Join(root, "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/access"), "DeviceFileMinor: 21\nDeviceFileMode: 292\n")
	touch(t, filepath.Join(root, "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/ci0/access"), "DeviceFileMinor: 22\nDeviceFileMode: 292\n")
	b, _ := openFake(t, migA100(), Config{}, deviceFiles{root: root}, newFakeClock())
	inv, err := b.Fingerprint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inv.SharedDeviceNodes, ","); got != "/dev/nvidiactl,/dev/nvidia-uvm" {
		t.Errorf("shared device files = %s", got)
	}
	if got := strings.Join(inv.Access[fakeUUID(1)].DeviceNodes, ","); got != "/dev/nvidia1" {
		t.Errorf("GPU 1 device files = %s", got)
	}
	want := "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22"
	if got := strings.Join(inv.Access[fakeMIGUUID(0, 0)].DeviceNodes, ","); got != want {
		t.Errorf("MIG instance device files = %s, want %s", got, want)
	}
}

func touch(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkNVMLFingerprint8 fingerprints the 8-GPU DGX H100 fake: every
// pairwise link, NVLink enumeration and the cell tree.
func BenchmarkNVMLFingerprint8(b *testing.B) {
	backend, _ := openFake(b, dgxH100(), Config{}, deviceFiles{}, newFakeClock())
	ctx := context.Background()
	for b.Loop() {
		if _, err := backend.Fingerprint(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNVMLLostGPUKeepsItsIdentity: a GPU whose calls start failing stays
// the same device (ID, model, memory), now unhealthy.
func TestNVMLLostGPUKeepsItsIdentity(t *testing.T) {
	b, f := openFake(t, pcieBox(), Config{}, deviceFiles{}, newFakeClock())
	if _, err := b.Fingerprint(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := f.Devices[5].(*server.Device)
	d.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	d.GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	inv, err := b.Fingerprint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[5]
	if g.ID != fakeUUID(5) || g.Model != "NVIDIA A100-PCIE-40GB" || g.MemoryMiB != 40960 || g.Healthy ||
		!strings.Contains(g.HealthDescription, "GetUUID: ERROR_GPU_IS_LOST") {
		t.Errorf("lost GPU = %+v", g)
	}
	if groups := deviceGroups(inv, BackendNVML); len(groups) != 1 {
		t.Errorf("%d groups, want the lost GPU in its model's group", len(groups))
	}
}

// TestNVMLXIDFingerprintsAtOnce: an XID is reported without waiting for
// the fingerprint period.
func TestNVMLXIDFingerprintsAtOnce(t *testing.T) {
	fake := newFakeNVML(pcieBox())
	impl := NewPlugin(testLogger(t))
	impl.openNVML = func(cfg Config, logger hclog.Logger) (Backend, error) {
		return newNVMLBackend(cfg, fake, logger, deviceFiles{}, newFakeClock().now)
	}
	dp := serve(t, impl)
	if err := dp.SetConfig(agentConfig(t, "backend = \"nvml\"\nfingerprint_period = \"1h\"")); err != nil {
		t.Fatal(err)
	}
	ch := fingerprints(t, dp)
	if resp := next(t, ch); resp.Error != nil || !resp.Devices[0].Devices[1].Healthy {
		t.Fatalf("first fingerprint = %+v", resp)
	}
	fake.sendXID(1, 94)
	resp := next(t, ch) // within next's 10 s, not the hour
	if d := resp.Devices[0].Devices[1]; d.Healthy || !strings.Contains(d.HealthDesc, "XID 94") {
		t.Errorf("GPU 1 after XID 94 = %+v", d)
	}
}

// TestNVMLMIGHealth: an XID inside one GPU instance marks only its MIG
// device; one on the whole GPU marks all its MIG devices.
func TestNVMLMIGHealth(t *testing.T) {
	b, f := openFake(t, migA100(), Config{}, deviceFiles{}, newFakeClock())
	health := func() map[string]bool {
		t.Helper()
		inv, err := b.Fingerprint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h := map[string]bool{}
		for _, g := range inv.GPUs {
			h[g.ID] = g.Healthy
		}
		return h
	}
	health()
	f.sendMIGXID(0, 2, 63) // GPU instance 2 is MIG instance 1 of GPU 0
	waitFor(t, "MIG instance 1 unhealthy", func() bool { return !health()[fakeMIGUUID(0, 1)] })
	h := health()
	if !h[fakeMIGUUID(0, 0)] || !h[fakeMIGUUID(0, 2)] || !h[fakeUUID(1)] {
		t.Errorf("an XID in GPU instance 2 marked others: %v", h)
	}
	f.sendXID(0, 79)
	waitFor(t, "all of GPU 0's instances unhealthy", func() bool {
		h := health()
		return !h[fakeMIGUUID(0, 0)] && !h[fakeMIGUUID(0, 2)]
	})
	if h := health(); !h[fakeUUID(1)] {
		t.Error("GPU 1 unhealthy after an XID on GPU 0")
	}
}

// fingerprintOnce builds the nvml backend on the fake f (closed when the
// test ends) and fingerprints once.
func fingerprintOnce(t *testing.T, f *fakeNVML) *nvmlBackend {
	t.Helper()
	b, err := newNVMLBackend(Config{}, f, testLogger(t), deviceFiles{}, newFakeClock().now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := b.Fingerprint(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNVMLRegistersBeforeWatching: the GPUs' events are registered before
// the watcher waits. On a real H200 (driver 580) a registration made while
// an nvmlEventSetWait is in progress waits for it to end, which made the
// first fingerprint take a whole eventWaitMillis (1 s) per GPU registered.
func TestNVMLRegistersBeforeWatching(t *testing.T) {
	f := newFakeNVML(dgxH100())
	f.registerTakes = 20 * time.Millisecond
	fingerprintOnce(t, f)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.registered) != 8 || f.waitedRegistrations != 0 {
		t.Errorf("%d GPUs registered, %d of them while the watcher waited on the set; want 8 and 0",
			len(f.registered), f.waitedRegistrations)
	}
}

// TestNVMLEventFallbacks: a GPU without ECC events is watched for XIDs
// alone; where no event set can be made, GPUs are still fingerprinted.
func TestNVMLEventFallbacks(t *testing.T) {
	t.Run("no ECC events", func(t *testing.T) {
		f := newFakeNVML(pcieBox())
		d := f.Devices[0].(*server.Device)
		d.RegisterEventsFunc = func(mask uint64, _ nvml.EventSet) nvml.Return {
			if mask&nvml.EventTypeDoubleBitEccError != 0 {
				return nvml.ERROR_NOT_SUPPORTED
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.registered[0] = mask
			return nvml.SUCCESS
		}
		b := fingerprintOnce(t, f)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.registered[0] != nvml.EventTypeXidCriticalError {
			t.Errorf("GPU 0 registered %#x, want XIDs only", f.registered[0])
		}
		if w := b.watching(); w[fakeUUID(0)] != "XIDs" || w[fakeUUID(1)] != "XIDs, double-bit ECC errors" {
			t.Errorf("watching = %v", w)
		}
	})
	t.Run("no event set", func(t *testing.T) {
		f := newFakeNVML(pcieBox())
		f.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		b, err := newNVMLBackend(Config{}, f, testLogger(t), deviceFiles{}, newFakeClock().now)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		inv, err := b.Fingerprint(context.Background())
		if err != nil || len(inv.GPUs) != 8 {
			t.Fatalf("fingerprint = %+v, %v", inv, err)
		}
	})
}

// TestNVMLAppearsLater: NVML failing at start (driver not loaded yet) gives
// no GPUs, said once; once it initialises, the GPUs are there.
func TestNVMLAppearsLater(t *testing.T) {
	f := newFakeNVML(pcieBox())
	inits := 0
	f.InitFunc = func() nvml.Return {
		inits++
		if inits <= 2 {
			return nvml.ERROR_DRIVER_NOT_LOADED
		}
		return nvml.SUCCESS
	}
	logs := &syncBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Info, Output: logs})
	b, err := newNVMLBackend(Config{}, f, logger, deviceFiles{}, newFakeClock().now)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if inv, err := b.Fingerprint(context.Background()); err != nil || len(inv.GPUs) != 0 {
		t.Fatalf("fingerprint without NVML = %+v, %v", inv, err)
	}
	if inv, err := b.Fingerprint(context.Background()); err != nil || len(inv.GPUs) != 8 {
		t.Fatalf("fingerprint once NVML is up = %+v, %v", inv, err)
	}
	out := logs.String()
	if n := strings.Count(out, "NVML is not available"); n != 1 || !strings.Contains(out, "the NVIDIA kernel driver is not loaded") ||
		!strings.Contains(out, "NVML is available now") {
		t.Errorf("logs:\n%s", out)
	}
}
