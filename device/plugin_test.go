package device

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/plugins/base"
	nomaddevice "github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"
	"github.com/zclconf/go-cty/cty/msgpack"

	"github.com/themis-nomad/themis/device/topology"
)

// harness serves a fresh Plugin over Nomad's gRPC device plugin transport and
// returns the client side, as the Nomad client sees it.
func harness(t *testing.T) nomaddevice.DevicePlugin {
	t.Helper()
	return serve(t, NewPlugin(hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Trace, Output: testWriter{t}})))
}

// serve serves impl over Nomad's gRPC device plugin transport and returns
// the client side.
func serve(t *testing.T, impl *Plugin) nomaddevice.DevicePlugin {
	t.Helper()
	client, server := goplugin.TestPluginGRPCConn(t, true, map[string]goplugin.Plugin{
		base.PluginTypeBase:   &base.PluginBase{Impl: impl},
		base.PluginTypeDevice: &nomaddevice.PluginDevice{Impl: impl},
	})
	t.Cleanup(func() {
		// Stop the server first: client.Close asks the server to stop
		// itself, which races with a concurrent server.Stop in go-plugin.
		server.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(base.PluginTypeDevice)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	dp, ok := raw.(nomaddevice.DevicePlugin)
	if !ok {
		t.Fatalf("dispensed %T, not a DevicePlugin", raw)
	}
	return dp
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// agentConfig encodes an agent config body the way Nomad's plugin loader
// does: decoded against the plugin's schema, then MessagePack.
func agentConfig(t *testing.T, body string) *base.Config {
	t.Helper()
	spec, diags := hclspecutils.Convert(configSpec)
	if diags.HasErrors() {
		t.Fatalf("convert spec: %v", diags)
	}
	file, diags := hclsyntax.ParseConfig([]byte(body), "agent.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parse config: %v", diags)
	}
	val, diags := hcldec.Decode(file.Body, spec, nil)
	if diags.HasErrors() {
		t.Fatalf("decode config: %v", diags)
	}
	data, err := msgpack.Marshal(val, val.Type())
	if err != nil {
		t.Fatalf("marshal config: %v", err)
	}
	return &base.Config{PluginConfig: data}
}

// copyFixture copies a testdata file into a temporary directory, so tests
// may edit it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	writeFile(t, path, string(src))
	return path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Write then rename, as an operator's editor or config tool would.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func configured(t *testing.T, body string) nomaddevice.DevicePlugin {
	t.Helper()
	dp := harness(t)
	if err := dp.SetConfig(agentConfig(t, body)); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	return dp
}

func fingerprints(t *testing.T, dp nomaddevice.DevicePlugin) <-chan *nomaddevice.FingerprintResponse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := dp.Fingerprint(ctx)
	if err != nil {
		t.Fatalf("Fingerprint: %v", err)
	}
	return ch
}

func next[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("stream closed")
		}
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the stream")
	}
	panic("unreachable")
}

func TestPluginInfoAndSchema(t *testing.T) {
	dp := harness(t)
	info, err := dp.PluginInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "themis-device" || info.Type != base.PluginTypeDevice || info.PluginVersion != "0.1.0" {
		t.Errorf("PluginInfo = %+v", info)
	}
	if _, err := dp.ConfigSchema(); err != nil {
		t.Errorf("ConfigSchema: %v", err)
	}
}

func TestSetConfigErrors(t *testing.T) {
	dir := t.TempDir()
	eight := copyFixture(t, "eight-gpu.hcl")
	two := copyFixture(t, "two-nodes.hcl")
	broken := filepath.Join(dir, "broken.hcl")
	writeFile(t, broken, "node \"a\" {\n  gpu {\n    index = -2\n    model = \"A\"\n    memory_mib = 1\n    path = \"p\"\n  }\n}\n")
	missing := filepath.Join(dir, "missing.hcl")

	tests := []struct {
		name string
		body string
		want []string
	}{
		{"no topology file", ``, []string{"topology_file is required"}},
		{"missing topology file", `topology_file = "` + missing + `"`, []string{missing, "no such file"}},
		{"invalid topology", `topology_file = "` + broken + `"`, []string{broken + ":3", "gpu index -2 must not be negative"}},
		{"unknown node", `topology_file = "` + eight + `"` + "\nnode = \"dgx-9\"", []string{`node "dgx-9" is not in topology file`, "dgx-0"}},
		{"ambiguous node", `topology_file = "` + two + `"`, []string{"has 2 nodes (node-a, node-b)", "set node"}},
		{"unknown backend", `backend = "cuda"`, []string{`backend "cuda" is unknown`}},
		{"bad xid_recovery", `backend = "nvml"` + "\nxid_recovery = \"soon\"", []string{`xid_recovery "soon"`}},
		{"negative xid_recovery", `backend = "nvml"` + "\nxid_recovery = \"-1m\"", []string{"must be positive", "empty for never"}},
		{"bad rack", `backend = "nvml"` + "\nrack = \"row1/rack2\"", []string{`rack "row1/rack2" must be one cell name`}},
		{"bad period", `topology_file = "` + eight + `"` + "\nfingerprint_period = \"often\"", []string{`fingerprint_period "often"`}},
		{"zero period", `topology_file = "` + eight + `"` + "\nfingerprint_period = \"0s\"", []string{"must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dp := harness(t)
			err := dp.SetConfig(agentConfig(t, tt.body))
			if err == nil {
				t.Fatal("SetConfig succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			// Over gRPC the error arrives on the stream.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := dp.Fingerprint(ctx)
			if err == nil {
				err = next(t, ch).Error
			}
			if err == nil || !strings.Contains(err.Error(), "not configured") {
				t.Errorf("Fingerprint on an unconfigured plugin: %v, want a not-configured error", err)
			}
		})
	}
}

func attrString(t *testing.T, g *nomaddevice.DeviceGroup, name string) string {
	t.Helper()
	a, ok := g.Attributes[name]
	if !ok {
		t.Fatalf("group %s has no attribute %q", g.Name, name)
	}
	s, ok := a.GetString()
	if !ok {
		t.Fatalf("attribute %q = %v is not a string", name, a)
	}
	return s
}

func TestFingerprintEightGPUNode(t *testing.T) {
	path := copyFixture(t, "eight-gpu.hcl")
	dp := configured(t, `topology_file = "`+path+`"`)
	resp := next(t, fingerprints(t, dp))
	if resp.Error != nil {
		t.Fatalf("fingerprint error: %v", resp.Error)
	}
	if len(resp.Devices) != 1 {
		t.Fatalf("got %d groups, want 1", len(resp.Devices))
	}
	g := resp.Devices[0]
	if g.Vendor != "themis" || g.Type != "gpu" || g.Name != "A100-SXM4-80GB" {
		t.Errorf("group = %s/%s/%s, want themis/gpu/A100-SXM4-80GB", g.Vendor, g.Type, g.Name)
	}
	var ids []string
	for _, d := range g.Devices {
		if !d.Healthy || d.HwLocality != nil {
			t.Errorf("device %+v: want healthy, no locality", d)
		}
		ids = append(ids, d.ID)
	}
	want := []string{"SIM-dgx-0-0", "SIM-dgx-0-1", "SIM-dgx-0-2", "SIM-dgx-0-3", "SIM-dgx-0-4", "SIM-dgx-0-5", "SIM-dgx-0-6", "SIM-dgx-0-7"}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}
	for name, value := range map[string]string{
		topology.AttrModel:        "A100-SXM4-80GB",
		topology.AttrBackend:      "sim",
		topology.AttrTopologyNode: "dgx-0",
		topology.AttrRack:         "rack1",
		topology.AttrLayout: "0:SIM-dgx-0-0:socket0/switch0/pair0;1:SIM-dgx-0-1:socket0/switch0/pair0;" +
			"2:SIM-dgx-0-2:socket0/switch1/pair0;3:SIM-dgx-0-3:socket0/switch1/pair0;" +
			"4:SIM-dgx-0-4:socket1/switch0/pair0;5:SIM-dgx-0-5:socket1/switch0/pair0;" +
			"6:SIM-dgx-0-6:socket1/switch1/pair0;7:SIM-dgx-0-7:socket1/switch1/pair0",
	} {
		if got := attrString(t, g, name); got != value {
			t.Errorf("attribute %s = %q, want %q", name, got, value)
		}
	}
	mem := g.Attributes[topology.AttrMemory]
	if want := structs.NewIntAttribute(81920, structs.UnitMiB); mem == nil || !mem.Equal(want) || mem.Unit != structs.UnitMiB {
		t.Errorf("memory = %v, want %v", mem, want)
	}
	entries, err := topology.DecodeLayout(attrString(t, g, topology.AttrLayout))
	if err != nil || len(entries) != 8 || entries[5].Cells()[0] != "socket1" {
		t.Errorf("layout decodes to %v, %v", entries, err)
	}
}

func TestFingerprintGroupsPerModel(t *testing.T) {
	path := copyFixture(t, "two-nodes.hcl")
	dp := configured(t, "topology_file = \""+path+"\"\nnode = \"node-a\"")
	resp := next(t, fingerprints(t, dp))
	if resp.Error != nil {
		t.Fatal(resp.Error)
	}
	if len(resp.Devices) != 2 || resp.Devices[0].Name != "T4" || resp.Devices[1].Name != "V100-SXM2-16GB" {
		t.Fatalf("groups = %v, want T4 then V100-SXM2-16GB", resp.Devices)
	}
	t4, v100 := resp.Devices[0], resp.Devices[1]
	if d := t4.Devices[0]; d.ID != "GPU-a2" || d.Healthy || d.HealthDesc == "" {
		t.Errorf("T4 device = %+v, want GPU-a2 unhealthy with a description", d)
	}
	if got := attrString(t, t4, topology.AttrLayout); got != "2:GPU-a2:socket1" {
		t.Errorf("T4 layout = %q", got)
	}
	if got := attrString(t, v100, topology.AttrLayout); got != "0:GPU-a0:socket0/pair0;1:GPU-a1:socket0/pair0" {
		t.Errorf("V100 layout = %q", got)
	}
	if d := v100.Devices[1]; d.HwLocality == nil || d.HwLocality.PciBusID != "00000000:3B:00.0" {
		t.Errorf("GPU-a1 locality = %+v", d.HwLocality)
	}
	if v100.Devices[0].HwLocality != nil {
		t.Errorf("GPU-a0 has locality %+v, want none", v100.Devices[0].HwLocality)
	}
	if got := attrString(t, v100, topology.AttrRack); got != topology.DefaultRack {
		t.Errorf("rack = %q, want %q", got, topology.DefaultRack)
	}
}

func TestFingerprintHealthFlip(t *testing.T) {
	path := copyFixture(t, "eight-gpu.hcl")
	dp := configured(t, "topology_file = \""+path+"\"\nfingerprint_period = \"20ms\"")
	ch := fingerprints(t, dp)
	if resp := next(t, ch); resp.Error != nil || !resp.Devices[0].Devices[3].Healthy {
		t.Fatalf("first fingerprint = %+v", resp)
	}

	// Nothing changed: nothing more is sent.
	select {
	case resp := <-ch:
		t.Fatalf("unchanged topology sent again: %+v", resp)
	case <-time.After(150 * time.Millisecond):
	}

	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flipped := strings.Replace(string(src), "index      = 3\n", "index      = 3\n    healthy    = false\n", 1)
	if flipped == string(src) {
		t.Fatal("fixture did not change")
	}
	writeFile(t, path, flipped)
	resp := next(t, ch)
	if resp.Error != nil {
		t.Fatal(resp.Error)
	}
	for i, d := range resp.Devices[0].Devices {
		if d.Healthy != (i != 3) {
			t.Errorf("device %s healthy = %v after flipping gpu 3", d.ID, d.Healthy)
		}
	}
	if desc := resp.Devices[0].Devices[3].HealthDesc; desc == "" {
		t.Error("unhealthy device has no health description")
	}

	// And back.
	writeFile(t, path, string(src))
	if resp := next(t, ch); resp.Error != nil || !resp.Devices[0].Devices[3].Healthy {
		t.Fatalf("after restoring: %+v", resp)
	}
}

func TestFingerprintErrors(t *testing.T) {
	t.Run("broken from the start", func(t *testing.T) {
		path := copyFixture(t, "eight-gpu.hcl")
		dp := configured(t, `topology_file = "`+path+`"`)
		writeFile(t, path, "node {")
		resp := next(t, fingerprints(t, dp))
		if resp.Error == nil || !strings.Contains(resp.Error.Error(), path+":1") {
			t.Fatalf("response = %+v, want an error naming %s:1", resp, path)
		}
	})
	t.Run("stays broken", func(t *testing.T) {
		path := copyFixture(t, "eight-gpu.hcl")
		dp := configured(t, "topology_file = \""+path+"\"\nfingerprint_period = \"10ms\"")
		ch := fingerprints(t, dp)
		if resp := next(t, ch); resp.Error != nil {
			t.Fatal(resp.Error)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		resp := next(t, ch)
		if resp.Error == nil || !strings.Contains(resp.Error.Error(), path) {
			t.Fatalf("response = %+v, want an error naming %s", resp, path)
		}
	})
	t.Run("node removed", func(t *testing.T) {
		path := copyFixture(t, "two-nodes.hcl")
		dp := configured(t, "topology_file = \""+path+"\"\nnode = \"node-b\"")
		writeFile(t, path, "node \"node-a\" {\n  gpu {\n    index = 0\n    model = \"T4\"\n    memory_mib = 1\n    path = \"\"\n  }\n}\n")
		resp := next(t, fingerprints(t, dp))
		if resp.Error == nil || !strings.Contains(resp.Error.Error(), `node "node-b" is no longer in topology file`) {
			t.Fatalf("response = %+v", resp)
		}
	})
}

func TestReserve(t *testing.T) {
	path := copyFixture(t, "eight-gpu.hcl")
	dp := configured(t, `topology_file = "`+path+`"`)
	tests := []struct {
		name    string
		ids     []string
		want    map[string]string
		wantErr string
	}{
		{name: "none", ids: nil, want: nil},
		{name: "one", ids: []string{"SIM-dgx-0-5"}, want: map[string]string{
			"NVIDIA_VISIBLE_DEVICES": "SIM-dgx-0-5", "CUDA_VISIBLE_DEVICES": "5", "THEMIS_GPU_IDS": "SIM-dgx-0-5"}},
		{name: "order kept", ids: []string{"SIM-dgx-0-3", "SIM-dgx-0-1"}, want: map[string]string{
			"NVIDIA_VISIBLE_DEVICES": "SIM-dgx-0-3,SIM-dgx-0-1", "CUDA_VISIBLE_DEVICES": "3,1", "THEMIS_GPU_IDS": "SIM-dgx-0-3,SIM-dgx-0-1"}},
		{name: "unknown", ids: []string{"SIM-dgx-0-1", "GPU-nope"}, wantErr: `unknown device "GPU-nope"`},
		{name: "twice", ids: []string{"SIM-dgx-0-1", "SIM-dgx-0-1"}, wantErr: `device "SIM-dgx-0-1" given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := dp.Reserve(tt.ids)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Reserve(%v) = %+v, %v; want error containing %q", tt.ids, res, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Reserve(%v): %v", tt.ids, err)
			}
			if len(res.Envs) != len(tt.want) || (len(tt.want) > 0 && !reflect.DeepEqual(res.Envs, tt.want)) {
				t.Errorf("envs = %v, want %v", res.Envs, tt.want)
			}
			if len(res.Mounts) != 0 || len(res.Devices) != 0 {
				t.Errorf("sim reservation mounts %v devices %v, want none", res.Mounts, res.Devices)
			}
		})
	}
}

func TestStats(t *testing.T) {
	path := copyFixture(t, "two-nodes.hcl")
	dp := configured(t, "topology_file = \""+path+"\"\nnode = \"node-a\"")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := dp.Stats(ctx, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the stream keeps coming at the interval
		resp := next(t, ch)
		if resp.Error != nil {
			t.Fatal(resp.Error)
		}
		if len(resp.Groups) != 2 || resp.Groups[0].Name != "T4" || resp.Groups[1].Name != "V100-SXM2-16GB" {
			t.Fatalf("groups = %+v", resp.Groups)
		}
		s, ok := resp.Groups[1].InstanceStats["GPU-a1"]
		if !ok || len(resp.Groups[1].InstanceStats) != 2 {
			t.Fatalf("V100 stats = %+v", resp.Groups[1].InstanceStats)
		}
		if s.Summary == nil || *s.Summary.IntNumeratorVal != 0 || *s.Summary.IntDenominatorVal != 16384 || s.Summary.Unit != "MiB" {
			t.Errorf("summary = %+v, want 0/16384 MiB", s.Summary)
		}
		if sim := s.Stats.Attributes["simulated"]; sim == nil || sim.BoolVal == nil || !*sim.BoolVal {
			t.Errorf("simulated = %+v, want true", sim)
		}
		if s.Timestamp.IsZero() || time.Since(s.Timestamp) > time.Minute {
			t.Errorf("timestamp = %v", s.Timestamp)
		}
	}
}

// TestExampleGPUAgentConfig: the nvml plugin block of the example agent
// config decodes against the plugin's schema.
func TestExampleGPUAgentConfig(t *testing.T) {
	src, err := os.ReadFile("../examples/agents/nomad-client-gpu.hcl")
	if err != nil {
		t.Fatal(err)
	}
	file, diags := hclsyntax.ParseConfig(src, "nomad-client-gpu.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var body []byte
	for _, b := range file.Body.(*hclsyntax.Body).Blocks {
		if b.Type == "plugin" && len(b.Labels) == 1 && b.Labels[0] == PluginName {
			for _, c := range b.Body.Blocks {
				if c.Type == "config" {
					r := c.Body.Range()
					body = src[r.Start.Byte+1 : r.End.Byte-1] // inside the braces
				}
			}
		}
	}
	if body == nil {
		t.Fatal(`no plugin "themis-device" { config { ... } } block`)
	}
	cfg, _, err := decodeConfig(agentConfig(t, string(body)).PluginConfig)
	if err != nil || cfg.Backend != BackendNVML || cfg.Rack != "rack0" {
		t.Fatalf("decoded %+v, %v", cfg, err)
	}
}
