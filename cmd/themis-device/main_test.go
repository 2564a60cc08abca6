package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/zclconf/go-cty/cty/msgpack"
)

// TestMain lets the test binary serve the plugin, as Nomad runs the
// themis-device binary: the tests below launch it as a subprocess.
func TestMain(m *testing.M) {
	if os.Getenv("THEMIS_DEVICE_TEST_SERVE") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// launch starts the plugin process the way a Nomad client does and
// configures it with an agent config body.
func launch(t *testing.T, body string) nomaddevice.DevicePlugin {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "THEMIS_DEVICE_TEST_SERVE=1")
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: base.Handshake,
		Plugins: map[string]goplugin.Plugin{
			base.PluginTypeBase:   &base.PluginBase{},
			base.PluginTypeDevice: &nomaddevice.PluginDevice{},
		},
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: hclog.Info, Output: os.Stderr}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start plugin: %v", err)
	}
	raw, err := rpc.Dispense(base.PluginTypeDevice)
	if err != nil {
		t.Fatal(err)
	}
	dp := raw.(nomaddevice.DevicePlugin)
	schema, err := dp.ConfigSchema()
	if err != nil {
		t.Fatal(err)
	}
	spec, diags := hclspecutils.Convert(schema)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	file, diags := hclsyntax.ParseConfig([]byte(body), "agent.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	val, diags := hcldec.Decode(file.Body, spec, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	data, err := msgpack.Marshal(val, val.Type())
	if err != nil {
		t.Fatal(err)
	}
	if err := dp.SetConfig(&base.Config{PluginConfig: data}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	return dp
}

func firstFingerprint(t *testing.T, dp nomaddevice.DevicePlugin) *nomaddevice.FingerprintResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := dp.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-ch:
		if resp == nil {
			t.Fatal("fingerprint stream closed")
		}
		return resp
	case <-ctx.Done():
		t.Fatal("no fingerprint in 30s")
	}
	return nil
}

// TestBinarySim: the plugin process starts and fingerprints the simulated
// topology on a machine without NVML; the sim backend never loads it.
func TestBinarySim(t *testing.T) {
	topo, err := filepath.Abs("../../examples/topology/dev-node.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dp := launch(t, `backend = "sim"
topology_file = "`+topo+`"`)
	resp := firstFingerprint(t, dp)
	if resp.Error != nil || len(resp.Devices) != 1 || len(resp.Devices[0].Devices) != 8 {
		t.Fatalf("fingerprint = %+v, want 8 simulated GPUs", resp)
	}
}

// TestBinaryNVML: the nvml backend starts in the plugin process; where
// libnvidia-ml cannot be loaded (CI) it reports no GPUs, never an error.
func TestBinaryNVML(t *testing.T) {
	resp := firstFingerprint(t, launch(t, `backend = "nvml"`))
	if resp.Error != nil {
		t.Fatalf("fingerprint error: %v", resp.Error)
	}
	if len(resp.Devices) > 0 {
		t.Logf("NVML is present here: %d GPU group(s) fingerprinted", len(resp.Devices))
	}
}
