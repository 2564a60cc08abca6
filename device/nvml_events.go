//go:build linux && cgo

package device

import (
	"context"
	"maps"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// eventWaitMillis is how long one wait for NVML events lasts, so the
// watcher sees its context end within it.
const eventWaitMillis = 1000

// healthEvents are the NVML events that may mark a GPU unhealthy.
const healthEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError

// watchLocked registers the GPUs not yet watched for health events,
// creating the event set and starting its watcher the first time. A GPU
// whose events cannot be watched is logged and fingerprinted without them.
//
// The first GPUs are registered before the watcher starts waiting: on a
// real H200 (driver 580) a registration made while an nvmlEventSetWait is
// in progress (on any event set) waits for it to end, which cost the first
// fingerprint eventWaitMillis per GPU (1.02 s for one GPU; 21 ms since). A
// GPU that appears later still waits up to eventWaitMillis.
func (b *nvmlBackend) watchLocked(gpus []physGPU) {
	start := false
	if b.events == nil {
		set, ret := b.lib.EventSetCreate()
		if ret != nvml.SUCCESS {
			b.logger.Warn("cannot watch NVML events: GPUs are not marked unhealthy on XIDs", "error", nvmlError(ret))
			return
		}
		b.events, start = set, true
	}
	for _, g := range gpus {
		if _, done := b.watched[g.uuid]; g.dev == nil || g.problem != "" || done {
			continue
		}
		what := "XIDs, double-bit ECC errors"
		ret := g.dev.RegisterEvents(healthEvents, b.events)
		if ret == nvml.ERROR_NOT_SUPPORTED {
			what = "XIDs"
			ret = g.dev.RegisterEvents(nvml.EventTypeXidCriticalError, b.events)
		}
		if ret != nvml.SUCCESS {
			b.logger.Warn("cannot watch the GPU's XIDs", "gpu", g.uuid, "error", nvmlError(ret))
			what = ""
		}
		b.watched[g.uuid] = what
	}
	if start {
		ctx, cancel := context.WithCancel(context.Background())
		b.stop = cancel
		go b.watchEvents(ctx, b.events)
	}
}

// watching returns, by UUID, which health events are watched on each GPU
// registered so far ("" for none).
func (b *nvmlBackend) watching() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.watched)
}

// watchEvents waits for events until ctx ends, then frees the set and
// shuts NVML down (Close asked for it).
func (b *nvmlBackend) watchEvents(ctx context.Context, set nvml.EventSet) {
	defer func() {
		set.Free()
		b.lib.Shutdown()
	}()
	for ctx.Err() == nil {
		e, ret := set.Wait(eventWaitMillis)
		switch ret {
		case nvml.SUCCESS:
			b.event(e)
		case nvml.ERROR_TIMEOUT:
		default:
			b.logger.Warn("waiting for NVML events failed", "error", nvmlError(ret))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// event records one health event against its GPU; the next fingerprint
// reports it.
func (b *nvmlBackend) event(e nvml.EventData) {
	if e.Device == nil {
		b.logger.Warn("NVML event without a device is ignored", "type", e.EventType, "data", e.EventData)
		return
	}
	uuid, ret := e.Device.GetUUID()
	if ret != nvml.SUCCESS {
		b.logger.Warn("NVML event on a GPU without a UUID is ignored", "type", e.EventType, "data", e.EventData, "error", nvmlError(ret))
		return
	}
	at := b.now()
	for _, id := range b.eventTargets(uuid, e.GpuInstanceId) {
		switch {
		case e.EventType&nvml.EventTypeXidCriticalError != 0:
			if b.health.xid(id, e.EventData, at) {
				b.logger.Warn("critical XID: GPU marked unhealthy", "gpu", id, "xid", e.EventData)
				b.notify()
			} else {
				b.logger.Debug("application XID: GPU stays healthy", "gpu", id, "xid", e.EventData)
			}
		case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
			b.health.markBad(id, "double-bit ECC error", at)
			b.logger.Warn("double-bit ECC error: GPU marked unhealthy", "gpu", id)
			b.notify()
		}
	}
}

// allInstances is the GPU instance ID of an event that is not inside one
// GPU instance (NVML writes 0xFFFFFFFF).
const allInstances = 0xFFFFFFFF

// eventTargets returns what an event on the GPU uuid marks: the MIG
// devices of GPU instance gi when the event names one the last fingerprint
// knows, else the whole GPU (and so all its MIG devices).
func (b *nvmlBackend) eventTargets(uuid string, gi uint32) []string {
	if gi == allInstances {
		return []string{uuid}
	}
	b.mu.Lock()
	ids := b.migGI[uuid][int(gi)]
	b.mu.Unlock()
	if len(ids) == 0 {
		return []string{uuid}
	}
	return ids
}
