//go:build linux && cgo

package device

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/device/topology"
)

// TestNVMLPluginOverGRPC drives the nvml backend on the DGX H100 fake
// through Nomad's gRPC device plugin transport: the fingerprint, an XID
// that marks a GPU bad and its recovery, Reserve and Stats.
func TestNVMLPluginOverGRPC(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"/dev/nvidiactl", "/dev/nvidia1", "/dev/nvidia3"} {
		touch(t, filepath.Join(root, p), "")
	}
	clock := newFakeClock()
	fake := newFakeNVML(dgxH100())
	impl := NewPlugin(testLogger(t))
	impl.openNVML = func(cfg Config, logger hclog.Logger) (Backend, error) {
		return newNVMLBackend(cfg, fake, logger, deviceFiles{root: root}, clock.now)
	}
	dp := serve(t, impl)
	if err := dp.SetConfig(agentConfig(t, `backend = "nvml"
node = "dgx-h100-0"
rack = "rack3"
fingerprint_period = "20ms"
xid_recovery = "1m"`)); err != nil {
		t.Fatal(err)
	}
	ch := fingerprints(t, dp)
	resp := next(t, ch)
	if resp.Error != nil {
		t.Fatal(resp.Error)
	}
	if len(resp.Devices) != 1 {
		t.Fatalf("groups = %+v, want one H100 group", resp.Devices)
	}
	g := resp.Devices[0]
	if g.Vendor != "themis" || g.Type != "gpu" || g.Name != "NVIDIA H100 80GB HBM3" || len(g.Devices) != 8 {
		t.Fatalf("group = %+v", g)
	}
	var layout []string
	for i := range 8 {
		layout = append(layout, strings.Join([]string{string(rune('0' + i)), fakeUUID(i), ""}, ":"))
	}
	for name, want := range map[string]string{
		topology.AttrBackend:      "nvml",
		topology.AttrTopologyNode: "dgx-h100-0",
		topology.AttrRack:         "rack3",
		topology.AttrLayout:       strings.Join(layout, ";"),
	} {
		if got := attrString(t, g, name); got != want {
			t.Errorf("attribute %s = %q, want %q", name, got, want)
		}
	}
	if d := g.Devices[2]; d.ID != fakeUUID(2) || !d.Healthy || d.HwLocality == nil || d.HwLocality.PciBusID != fakeBusID(2) {
		t.Errorf("device 2 = %+v", d)
	}

	// A critical XID marks GPU 6 bad on the next fingerprint...
	fake.sendXID(6, 79)
	resp = next(t, ch)
	for i, d := range resp.Devices[0].Devices {
		if d.Healthy != (i != 6) {
			t.Errorf("device %d healthy = %v after XID 79 on GPU 6", i, d.Healthy)
		}
	}
	if desc := resp.Devices[0].Devices[6].HealthDesc; !strings.Contains(desc, "XID 79") {
		t.Errorf("GPU 6 health description %q", desc)
	}
	// ... and good again once xid_recovery has passed.
	clock.advance(time.Minute)
	if resp := next(t, ch); !resp.Devices[0].Devices[6].Healthy {
		t.Errorf("GPU 6 still unhealthy after recovery: %q", resp.Devices[0].Devices[6].HealthDesc)
	}

	res, err := dp.Reserve([]string{fakeUUID(3), fakeUUID(1)})
	if err != nil {
		t.Fatal(err)
	}
	ids := fakeUUID(3) + "," + fakeUUID(1)
	if want := map[string]string{EnvNvidiaVisibleDevices: ids, EnvCudaVisibleDevices: ids, EnvThemisGPUIDs: ids}; !reflect.DeepEqual(res.Envs, want) {
		t.Errorf("envs = %v, want %v", res.Envs, want)
	}
	var files []string
	for _, d := range res.Devices {
		if d.TaskPath != d.HostPath || d.CgroupPerms != "rw" {
			t.Errorf("device spec %+v", d)
		}
		files = append(files, d.HostPath)
	}
	if got := strings.Join(files, ","); got != "/dev/nvidia3,/dev/nvidia1,/dev/nvidiactl" {
		t.Errorf("device files = %s", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stats, err := dp.Stats(ctx, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	sresp := next(t, stats)
	if sresp.Error != nil || len(sresp.Groups) != 1 {
		t.Fatalf("stats = %+v", sresp)
	}
	s := sresp.Groups[0].InstanceStats[fakeUUID(4)]
	if s == nil || *s.Summary.IntNumeratorVal != 4096 || *s.Summary.IntDenominatorVal != 81920 {
		t.Fatalf("GPU 4 stats = %+v", s)
	}
	if temp := s.Stats.Attributes["temperature"]; temp == nil || *temp.IntNumeratorVal != 44 {
		t.Errorf("GPU 4 temperature = %+v", temp)
	}
	if p := s.Stats.Attributes["power"]; p == nil || *p.FloatNumeratorVal != 102 {
		t.Errorf("GPU 4 power = %+v", p)
	}
}

// syncBuffer is a log sink tests read while the plugin writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNVMLAbsent runs the real nvml backend where libnvidia-ml cannot be
// loaded (as in CI): the plugin configures, says so in one line, and
// fingerprints no GPUs.
func TestNVMLAbsent(t *testing.T) {
	if ret := nvml.New().Init(); ret == nvml.SUCCESS {
		t.Skip("NVML is available on this machine; TestRealGPU covers it")
	}
	logs := &syncBuffer{}
	impl := NewPlugin(hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug,
		Output: io.MultiWriter(logs, testWriter{t})}))
	dp := serve(t, impl)
	if err := dp.SetConfig(agentConfig(t, `backend = "nvml"`)); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	resp := next(t, fingerprints(t, dp))
	if resp.Error != nil || len(resp.Devices) != 0 {
		t.Fatalf("fingerprint = %+v, want no GPUs and no error", resp)
	}
	if n := strings.Count(logs.String(), "NVML is not available: reporting no GPUs"); n != 1 {
		t.Errorf("the absence was logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "libnvidia-ml.so.1 cannot be loaded") {
		t.Errorf("the log does not say why:\n%s", logs)
	}
	if res, err := dp.Reserve([]string{"GPU-1"}); err == nil {
		t.Errorf("Reserve of an unknown GPU = %+v", res)
	}
}

// TestSimNeverOpensNVML: the sim backend is built without touching NVML.
func TestSimNeverOpensNVML(t *testing.T) {
	impl := NewPlugin(testLogger(t))
	impl.openNVML = func(Config, hclog.Logger) (Backend, error) {
		t.Error("the sim backend opened NVML")
		return nil, nil
	}
	dp := serve(t, impl)
	if err := dp.SetConfig(agentConfig(t, `topology_file = "`+copyFixture(t, "eight-gpu.hcl")+`"`)); err != nil {
		t.Fatal(err)
	}
	if resp := next(t, fingerprints(t, dp)); resp.Error != nil || len(resp.Devices) != 1 {
		t.Fatalf("fingerprint = %+v", resp)
	}
}
