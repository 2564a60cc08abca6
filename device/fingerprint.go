package device

import (
	"context"
	"reflect"
	"sort"
	"time"

	nomaddevice "github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/themis-nomad/themis/device/topology"
)

// maxFingerprintFailures is how many fingerprints in a row may fail after a
// good one before the stream reports the error. Nomad stops a device plugin
// whose fingerprint stream reports an error, so a topology file caught
// half-written by an editor must not do that; a file that stays broken does.
const maxFingerprintFailures = 3

// Fingerprint streams the node's GPUs as device groups, one per model. The
// first fingerprint is sent at once; later ones only when something changed
// (a GPU's health, a GPU added or removed, an attribute).
func (p *Plugin) Fingerprint(ctx context.Context) (<-chan *nomaddevice.FingerprintResponse, error) {
	backend, period, err := p.configured()
	if err != nil {
		return nil, err
	}
	out := make(chan *nomaddevice.FingerprintResponse)
	go p.fingerprintLoop(ctx, backend, period, out)
	return out, nil
}

func (p *Plugin) fingerprintLoop(ctx context.Context, backend Backend, period time.Duration, out chan<- *nomaddevice.FingerprintResponse) {
	defer close(out)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last []*nomaddevice.DeviceGroup
	sent, failures := false, 0
	var changed <-chan struct{}
	if n, ok := backend.(Notifier); ok {
		changed = n.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			timer.Reset(period)
		case <-changed:
		}

		inv, err := backend.Fingerprint(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if sent && failures < maxFingerprintFailures {
				p.logger.Warn("fingerprint failed; keeping the last good one", "error", err,
					"failures", failures, "limit", maxFingerprintFailures)
				continue
			}
			p.logger.Error("fingerprint failed", "error", err)
			send(ctx, out, nomaddevice.NewFingerprintError(streamErr("fingerprint", err)))
			return
		}
		failures = 0
		p.setLatest(inv)
		groups := deviceGroups(inv, backend.Name())
		if sent && reflect.DeepEqual(groups, last) {
			continue
		}
		p.logger.Debug("devices changed", "node", inv.Node, "gpus", len(inv.GPUs), "groups", len(groups))
		if !send(ctx, out, nomaddevice.NewFingerprint(groups...)) {
			return
		}
		last, sent = groups, true
	}
}

// send delivers v unless ctx ends first.
func send[T any](ctx context.Context, out chan<- T, v T) bool {
	select {
	case out <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

// deviceGroups groups an inventory's GPUs by model, groups sorted by model
// and devices by index.
func deviceGroups(inv *Inventory, backend string) []*nomaddevice.DeviceGroup {
	byModel := map[string][]topology.GPU{}
	for _, g := range inv.GPUs {
		byModel[g.Model] = append(byModel[g.Model], g)
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)

	groups := make([]*nomaddevice.DeviceGroup, 0, len(models))
	for _, model := range models {
		gpus := byModel[model]
		sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
		devices := make([]*nomaddevice.Device, len(gpus))
		for i, g := range gpus {
			d := &nomaddevice.Device{ID: g.ID, Healthy: g.Healthy}
			if !g.Healthy {
				d.HealthDesc = g.HealthDescription
			}
			if g.PCIBusID != "" {
				d.HwLocality = &nomaddevice.DeviceLocality{PciBusID: g.PCIBusID}
			}
			devices[i] = d
		}
		groups = append(groups, &nomaddevice.DeviceGroup{
			Vendor:  topology.Vendor,
			Type:    topology.DeviceType,
			Name:    model,
			Devices: devices,
			Attributes: map[string]*structs.Attribute{
				topology.AttrModel:        structs.NewStringAttribute(model),
				topology.AttrMemory:       structs.NewIntAttribute(groupMemory(gpus), structs.UnitMiB),
				topology.AttrBackend:      structs.NewStringAttribute(backend),
				topology.AttrTopologyNode: structs.NewStringAttribute(inv.Node),
				topology.AttrRack:         structs.NewStringAttribute(inv.Rack),
				topology.AttrLayout:       structs.NewStringAttribute(topology.EncodeLayout(gpus)),
			},
		})
	}
	return groups
}

// groupMemory is the memory of the group's smallest healthy GPU (of its
// smallest GPU when none is healthy): Nomad keeps one value per group, a job
// that asks for memory >= X must fit on any GPU it may be given, and an
// unhealthy GPU, which is given to none, may report no memory at all.
func groupMemory(gpus []topology.GPU) int64 {
	m, healthy := int64(0), false
	for _, g := range gpus {
		switch {
		case g.Healthy && (!healthy || g.MemoryMiB < m):
			m, healthy = g.MemoryMiB, true
		case !healthy && (m == 0 || g.MemoryMiB < m):
			m = g.MemoryMiB
		}
	}
	return m
}
