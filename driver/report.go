package driver

import (
	"context"
	"time"

	"github.com/themis-nomad/themis/planner/lease"
)

// reportCheckpoints publishes the task's newest complete checkpoint through
// r whenever a newer one appears (looked for every period), and once more
// when the process exits, until ctx ends. The planner reads these records
// to tell how much work a running job would lose if it were preempted now.
// A failure to publish is logged and retried at the next look.
func (h *taskHandle) reportCheckpoints(ctx context.Context, r CheckpointReporter, period time.Duration) {
	var last time.Time
	report := func() {
		c, ok, err := h.proto.latest()
		if err != nil {
			h.logger.Debug("cannot list checkpoints to report", "dir", h.proto.checkpointDir, "error", err)
			return
		}
		if !ok || !c.Time.After(last) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, consulTimeout)
		defer cancel()
		rec := lease.CheckpointRecord{Namespace: h.cfg.Namespace, JobID: h.cfg.JobID, Name: c.Name, Time: c.Time.UTC(), AllocID: h.cfg.AllocID}
		if err := r.ReportCheckpoint(rctx, rec); err != nil {
			h.logger.Warn("cannot publish the task's newest checkpoint; retrying", "checkpoint", c.Name, "error", err)
			return
		}
		last = c.Time
	}
	h.every(ctx, period, report)
}

// every calls look every period while the task runs, and once more when
// it has exited, until ctx ends.
func (h *taskHandle) every(ctx context.Context, period time.Duration, look func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.done:
			look()
			return
		case <-t.C:
			look()
		}
	}
}
