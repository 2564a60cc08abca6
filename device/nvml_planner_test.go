//go:build linux && cgo

package device

import (
	"context"
	"testing"

	"github.com/hashicorp/nomad/api"
	nomaddevice "github.com/hashicorp/nomad/plugins/device"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/nomad"
)

// nodeStub is the Nomad node a client running the plugin shows the
// planner: the fingerprint's device groups as node resources.
func nodeStub(groups []*nomaddevice.DeviceGroup) *api.NodeListStub {
	n := &api.NodeListStub{ID: "node-1", Name: "gpu-node", Status: "ready", SchedulingEligibility: "eligible",
		NodeResources: &api.NodeResources{}}
	for _, g := range groups {
		d := &api.NodeDeviceResource{Vendor: g.Vendor, Type: g.Type, Name: g.Name, Attributes: map[string]*api.Attribute{}}
		for name, a := range g.Attributes {
			if a.String != nil {
				d.Attributes[name] = &api.Attribute{StringVal: a.String}
			}
		}
		for _, inst := range g.Devices {
			d.Instances = append(d.Instances, &api.NodeDevice{ID: inst.ID, Healthy: inst.Healthy, HealthDescription: inst.HealthDesc})
		}
		n.NodeResources.Devices = append(n.NodeResources.Devices, d)
	}
	return n
}

// TestNVMLCellsInThePlanner reads the fakes' fingerprints as the planner
// does (planner/nomad.NodeFromNomad) and builds HiveD's cells from them
// (planner/hived.New): the cell tree, MIG instances as leaves under their
// GPU, and a lost GPU's cells bad.
func TestNVMLCellsInThePlanner(t *testing.T) {
	tests := []struct {
		name    string
		machine fakeMachine
		// want: GPUs and bad GPUs of some cells, by name.
		want map[string][2]int
	}{
		{name: "DGX H100", machine: dgxH100(), want: map[string][2]int{"node-1": {8, 0}}},
		{name: "PCIe box", machine: pcieBox(), want: map[string][2]int{
			"node-1": {8, 0}, "node-1/socket0": {4, 0}, "node-1/socket1": {4, 0},
			"node-1/socket0/switch0": {2, 0}, "node-1/socket1/switch3": {2, 0}}},
		{name: "MIG A100", machine: migA100(), want: map[string][2]int{
			"node-1": {4, 0}, "node-1/gpu0": {3, 0}, fakeMIGUUID(0, 2): {1, 0}, fakeUUID(1): {1, 0}}},
		{name: "lost GPU", machine: unhealthyBox(), want: map[string][2]int{
			"node-1": {8, 1}, "node-1/socket1": {4, 1}, "node-1/socket1/switch2": {2, 1},
			"node-1/socket0": {4, 0}, fakeUUID(5): {1, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := openFake(t, tt.machine, Config{}, deviceFiles{}, newFakeClock())
			inv, err := b.Fingerprint(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			node, ok, err := nomad.NodeFromNomad(nodeStub(deviceGroups(inv, BackendNVML)))
			if err != nil || !ok {
				t.Fatalf("NodeFromNomad: %v, %v", ok, err)
			}
			cluster, err := hived.New([]core.Node{node}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][2]int{}
			for _, c := range cluster.Physical() {
				got[c.Name] = [2]int{c.GPUs, c.Bad}
			}
			for name, w := range tt.want {
				if g, ok := got[name]; !ok || g != w {
					t.Errorf("cell %s: GPUs, bad = %v (present %v), want %v", name, g, ok, w)
				}
			}
			if t.Failed() {
				t.Logf("cells: %v", got)
			}
		})
	}
}
