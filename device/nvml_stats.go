//go:build linux && cgo

package device

import (
	"context"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Stats samples each GPU and MIG instance of the last fingerprint (taking
// one first when there is none): memory used and total, and for whole GPUs
// utilisation, temperature and power. A measurement NVML cannot take is
// left out; a GPU whose memory cannot be read reports 0 of 0.
func (b *nvmlBackend) Stats(ctx context.Context) ([]GPUStats, error) {
	b.mu.Lock()
	devices := b.devices
	b.mu.Unlock()
	if devices == nil {
		if _, err := b.Fingerprint(ctx); err != nil {
			return nil, err
		}
		b.mu.Lock()
		devices = b.devices
		b.mu.Unlock()
	}
	now := b.now()
	stats := make([]GPUStats, 0, len(devices))
	for _, d := range devices {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s := GPUStats{ID: d.id, Model: d.model, Timestamp: now}
		if mem, ret := d.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			s.MemoryTotalMiB, s.MemoryUsedMiB = int64(mem.Total>>20), int64(mem.Used>>20)
		}
		if !d.mig {
			if u, ret := d.dev.GetUtilizationRates(); ret == nvml.SUCCESS {
				s.UtilizationPct, s.MemoryUtilPct = ptr(int64(u.Gpu)), ptr(int64(u.Memory))
			}
			if t, ret := d.dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
				s.TemperatureC = ptr(int64(t))
			}
			if mw, ret := d.dev.GetPowerUsage(); ret == nvml.SUCCESS {
				s.PowerW = ptr(float64(mw) / 1000)
			}
		}
		stats = append(stats, s)
	}
	return stats, nil
}

func ptr[T any](v T) *T { return &v }
