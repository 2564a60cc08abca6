package device

import (
	"context"
	"sort"
	"time"

	nomaddevice "github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/themis-nomad/themis/device/topology"
)

// Stats streams per-GPU statistics every interval, grouped as the
// fingerprint groups them. On an error it sends it and ends the stream; Nomad
// retries with backoff.
func (p *Plugin) Stats(ctx context.Context, interval time.Duration) (<-chan *nomaddevice.StatsResponse, error) {
	backend, _, err := p.configured()
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "stats interval %s must be positive", interval)
	}
	out := make(chan *nomaddevice.StatsResponse)
	go p.statsLoop(ctx, backend, interval, out)
	return out, nil
}

func (p *Plugin) statsLoop(ctx context.Context, backend Backend, interval time.Duration, out chan<- *nomaddevice.StatsResponse) {
	defer close(out)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			timer.Reset(interval)
		}
		samples, err := backend.Stats(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.logger.Error("stats failed", "error", err)
				send(ctx, out, nomaddevice.NewStatsError(streamErr("stats", err)))
			}
			return
		}
		if !send(ctx, out, &nomaddevice.StatsResponse{Groups: statsGroups(samples)}) {
			return
		}
	}
}

// statsGroups groups samples by model, in model order.
func statsGroups(samples []GPUStats) []*nomaddevice.DeviceGroupStats {
	byModel := map[string]*nomaddevice.DeviceGroupStats{}
	for _, s := range samples {
		g, ok := byModel[s.Model]
		if !ok {
			g = &nomaddevice.DeviceGroupStats{
				Vendor:        topology.Vendor,
				Type:          topology.DeviceType,
				Name:          s.Model,
				InstanceStats: map[string]*nomaddevice.DeviceStats{},
			}
			byModel[s.Model] = g
		}
		g.InstanceStats[s.ID] = deviceStats(s)
	}
	groups := make([]*nomaddevice.DeviceGroupStats, 0, len(byModel))
	for _, g := range byModel {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	return groups
}

func deviceStats(s GPUStats) *nomaddevice.DeviceStats {
	used, total, simulated := s.MemoryUsedMiB, s.MemoryTotalMiB, s.Simulated
	desc := "GPU memory used"
	if simulated {
		desc = "GPU memory used (simulated GPU: nothing runs on it, always 0)"
	}
	memory := &structs.StatValue{
		IntNumeratorVal:   &used,
		IntDenominatorVal: &total,
		Unit:              structs.UnitMiB,
		Desc:              desc,
	}
	attrs := map[string]*structs.StatValue{
		"memory_used": memory,
		"memory_total": {
			IntNumeratorVal: &total,
			Unit:            structs.UnitMiB,
			Desc:            "GPU memory",
		},
		"simulated": {
			BoolVal: &simulated,
			Desc:    "true when these numbers are simulated, not measured on a GPU",
		},
	}
	if s.UtilizationPct != nil {
		attrs["utilization"] = &structs.StatValue{IntNumeratorVal: s.UtilizationPct, Unit: "%", Desc: "percent of time a kernel ran"}
	}
	if s.MemoryUtilPct != nil {
		attrs["memory_utilization"] = &structs.StatValue{IntNumeratorVal: s.MemoryUtilPct, Unit: "%", Desc: "percent of time GPU memory was read or written"}
	}
	if s.TemperatureC != nil {
		attrs["temperature"] = &structs.StatValue{IntNumeratorVal: s.TemperatureC, Unit: "C", Desc: "GPU temperature"}
	}
	if s.PowerW != nil {
		attrs["power"] = &structs.StatValue{FloatNumeratorVal: s.PowerW, Unit: structs.UnitW, Desc: "board power draw"}
	}
	return &nomaddevice.DeviceStats{
		Summary:   memory,
		Stats:     &structs.StatObject{Attributes: attrs},
		Timestamp: s.Timestamp,
	}
}
