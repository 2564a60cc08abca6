package device

import (
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/device/topology"
)

func TestParsePCIAddress(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "00000000:3B:00.0", want: "00000000:3B:00.0"},
		{in: "0000:3b:00.0", want: "00000000:3B:00.0"},
		{in: "3b:1f.7", want: "00000000:3B:1F.7"},
		{in: "0001:C1:00.1", want: "00000001:C1:00.1"},
		{in: "", wantErr: "want [domain:]bus:device.function"},
		{in: "0000:3b:00", wantErr: "want device.function"},
		{in: "0000:3b:20.0", wantErr: "device 0x20 is above 0x1f"},
		{in: "0000:100:00.0", wantErr: "bus 0x100 is above 0xff"},
		{in: "0000:3b:00.8", wantErr: "function 0x8 is above 0x7"},
		{in: "0000:+3:00.0", wantErr: "not hexadecimal"},
		{in: "0000:3g:00.0", wantErr: "not hexadecimal"},
		{in: "a:b:c:d", wantErr: "want [domain:]bus:device.function"},
	}
	for _, tt := range tests {
		a, err := parsePCIAddress(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parsePCIAddress(%q) = %v, %v; want error containing %q", tt.in, a, err, tt.wantErr)
			}
			continue
		}
		if err != nil || a.String() != tt.want {
			t.Errorf("parsePCIAddress(%q) = %v, %v; want %s", tt.in, a, err, tt.want)
		}
	}
}

// FuzzParsePCIAddress: what parses writes back to a form that parses to the
// same address.
func FuzzParsePCIAddress(f *testing.F) {
	for _, s := range []string{"00000000:3B:00.0", "0000:3b:00.0", "3b:1f.7", "::.", "0:0:0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parsePCIAddress(s)
		if err != nil {
			return
		}
		b, err := parsePCIAddress(a.String())
		if err != nil || a != b {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, a, a.String(), b, err)
		}
	})
}

func TestParseCapMinor(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n", 12, true},
		{"DeviceFileMode: 292\nDeviceFileMinor:0", 0, true},
		{"DeviceFileMinor: -1\n", 0, false},
		{"DeviceFileMinor: x\n", 0, false},
		{"DeviceFileMinor: +3\n", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := parseCapMinor(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseCapMinor(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParseCapMinor(f *testing.F) {
	f.Add("DeviceFileMinor: 12\nDeviceFileMode: 292\n")
	f.Add("DeviceFileMinor:\n")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseCapMinor(s)
		if err == nil && n < 0 {
			t.Fatalf("parseCapMinor(%q) = %d", s, n)
		}
	})
}

func TestCString(t *testing.T) {
	var b [32]int8
	for i, c := range "00000000:3B:00.0" {
		b[i] = int8(c)
	}
	if got := cString(b[:]); got != "00000000:3B:00.0" {
		t.Errorf("cString = %q", got)
	}
	full := [4]int8{'a', 'b', 'c', 'd'}
	if got := cString(full[:]); got != "abcd" {
		t.Errorf("cString without NUL = %q", got)
	}
}

// FuzzModelName: any NVML name becomes a valid device group name.
func FuzzModelName(f *testing.F) {
	f.Add("NVIDIA A100-SXM4-40GB MIG 1g.5gb")
	f.Add(" / \x00")
	f.Fuzz(func(t *testing.T, s string) {
		m := modelName(s)
		if m == "" || strings.Contains(m, "/") || strings.IndexFunc(m, isControlRune) >= 0 || strings.TrimSpace(m) != m {
			t.Fatalf("modelName(%q) = %q", s, m)
		}
	})
}

func TestGPUHealth(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newGPUHealth(time.Hour)
	if h.xid("GPU-a", 13, t0) {
		t.Error("application XID 13 counted")
	}
	if ok, _ := h.check("GPU-a", t0); !ok {
		t.Error("GPU-a unhealthy after XID 13")
	}
	h.xid("GPU-a", 79, t0)
	h.markBad("GPU-a", "older event", t0.Add(-time.Minute)) // older: ignored
	ok, desc := h.check("GPU-a", t0.Add(59*time.Minute))
	if ok || !strings.HasPrefix(desc, "XID 79 at 2026-01-01T00:00:00Z; healthy again at 2026-01-01T01:00:00Z") {
		t.Errorf("check = %v %q", ok, desc)
	}
	if ok, _ := h.check("GPU-a", t0.Add(time.Hour)); !ok {
		t.Error("GPU-a still unhealthy after the recovery period")
	}
	never := newGPUHealth(0)
	never.markBad("GPU-b", "double-bit ECC error", t0)
	if ok, desc := never.check("GPU-b", t0.Add(1000*time.Hour)); ok || desc != "double-bit ECC error at 2026-01-01T00:00:00Z" {
		t.Errorf("check = %v %q", ok, desc)
	}
}

func TestGroupMemory(t *testing.T) {
	gpu := func(mem int64, healthy bool) topology.GPU { return topology.GPU{MemoryMiB: mem, Healthy: healthy} }
	tests := []struct {
		name string
		gpus []topology.GPU
		want int64
	}{
		{"smallest", []topology.GPU{gpu(80, true), gpu(40, true)}, 40},
		{"an unhealthy GPU does not count", []topology.GPU{gpu(1, false), gpu(80, true), gpu(81, true)}, 80},
		{"none healthy: smallest", []topology.GPU{gpu(80, false), gpu(40, false)}, 40},
	}
	for _, tt := range tests {
		if got := groupMemory(tt.gpus); got != tt.want {
			t.Errorf("%s: groupMemory = %d, want %d", tt.name, got, tt.want)
		}
	}
}
