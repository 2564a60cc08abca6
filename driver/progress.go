package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/driver/nofollow"
	"github.com/themis-nomad/themis/planner/lease"
)

// Progress. A workload tells the scheduler how far it has come by writing
// a small JSON object to the file THEMIS_PROGRESS_FILE names (in its
// checkpoint dir), replacing it whole (write a temp file, rename):
//
//	{"iteration": 1200, "total": 5000, "loss": 0.53}
//
// iteration is required; total (iterations planned; default: the stanza's
// iterations) and loss are optional. The driver reads the file every
// report period and publishes what changed, with the iteration rate it
// measured, to Consul (lease.ProgressKey), where the planner estimates the
// job's remaining time from it and `themis status` shows it. A workload
// that reports nothing is still scheduled (docs/themis.md). Only rank 0 of
// a multi-node gang reports.

// ProgressFileName is the progress file's name in the checkpoint dir.
const ProgressFileName = "themis-progress.json"

// EnvProgressFile names the progress file in a task's environment.
const EnvProgressFile = "THEMIS_PROGRESS_FILE"

// ProgressReporter publishes progress records; ConsulLeases implements it.
type ProgressReporter interface {
	ReportProgress(ctx context.Context, rec lease.ProgressRecord) error
}

// progressReport is the progress file's content.
type progressReport struct {
	Iteration *int64   `json:"iteration"`
	Total     int64    `json:"total"`
	Loss      *float64 `json:"loss"`
}

// maxProgressFile caps what the driver reads of a progress file (a few
// dozen bytes are expected); a larger one is refused unread.
const maxProgressFile = 64 << 10

// readProgress reads and checks the progress file in the checkpoint dir d
// (nofollow: not through a symlink, not a FIFO or a device, not above
// maxProgressFile, only when owner owns it); ok is false when there is
// none yet.
func readProgress(d *nofollow.Dir, owner int) (progressReport, bool, error) {
	b, err := d.ReadFile(ProgressFileName, maxProgressFile, owner)
	if errors.Is(err, fs.ErrNotExist) {
		return progressReport{}, false, nil
	}
	if err != nil {
		return progressReport{}, false, fmt.Errorf("progress file: %w", err)
	}
	path := filepath.Join(d.Path(), ProgressFileName)
	var r progressReport
	if err := json.Unmarshal(b, &r); err != nil {
		return progressReport{}, false, fmt.Errorf("progress file %s: %w", path, err)
	}
	if r.Iteration == nil || *r.Iteration < 0 || r.Total < 0 {
		return progressReport{}, false, fmt.Errorf("progress file %s: want {\"iteration\": <n >= 0>, \"total\": <n >= 0, optional>, \"loss\": <number, optional>}", path)
	}
	return r, true, nil
}

// progressMeter turns successive reports into records with a rate.
type progressMeter struct {
	// first and firstAt anchor the rate: the first report of this run.
	first   int64
	firstAt time.Time
	// carried is the iteration the progress file held as the task started
	// (hasCarried: it held one): a resumed job's file outlives its
	// allocations, so that count is the last run's, read before this run
	// restored its checkpoint. A report of it anchors no rate; the rate is
	// measured from the first count this run writes, so restore and
	// start-up time do not dilute it.
	carried    int64
	hasCarried bool
	last       lease.ProgressRecord
	stanzaIter int64
	// accepted is the iteration of the last report taken (seen: one was).
	accepted int64
	seen     bool
}

// eventProgressRefused is the task event of a progress report the driver
// does not publish (progressMeter.implausible).
const eventProgressRefused = "Progress report refused"

// implausible says why report r cannot be true, and which rule refuses it
// ("" for a plausible report): its iteration count went back from the last
// report taken (within one run of the task: a count restarted would let a
// workload restart the rate it is measured at, then jump), or passed the
// stanza's iterations (the work the job said it plans). Such a report is
// not published: a workload must not make its rate, and so its remaining
// work, look what it likes (docs/themis.md, "Whose progress counts").
func (m *progressMeter) implausible(r progressReport) (why, rule string) {
	it := *r.Iteration
	switch {
	case m.seen && it < m.accepted:
		return fmt.Sprintf("iteration %d went back from %d", it, m.accepted), "backwards"
	case m.stanzaIter > 0 && it > m.stanzaIter:
		return fmt.Sprintf("iteration %d is past the stanza's iterations (%d)", it, m.stanzaIter), "past iterations"
	}
	return "", ""
}

// observe returns the record for report r read at now, and whether it
// differs from the last one published.
func (m *progressMeter) observe(r progressReport, now time.Time) (lease.ProgressRecord, bool) {
	it := *r.Iteration
	if m.firstAt.IsZero() && (!m.hasCarried || it != m.carried) {
		m.first, m.firstAt = it, now // the first report of this run
	}
	m.accepted, m.seen = it, true
	rec := lease.ProgressRecord{Iteration: it, Total: r.Total, Loss: r.Loss, At: now.UTC()}
	if rec.Total == 0 {
		rec.Total = m.stanzaIter
	}
	if d := now.Sub(m.firstAt).Seconds(); !m.firstAt.IsZero() && d > 0 && it > m.first {
		rec.Rate = float64(it-m.first) / d
	}
	changed := rec.Iteration != m.last.Iteration || rec.Total != m.last.Total || !sameLoss(rec.Loss, m.last.Loss)
	return rec, changed
}

func sameLoss(a, b *float64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// reportProgress publishes the task's progress through r whenever the
// progress file changes (looked at every period), until the task exits or
// ctx ends. A report that is not plausible is not published; refused is
// told why (a task event), once while the same rule keeps refusing.
func (h *taskHandle) reportProgress(ctx context.Context, r ProgressReporter, period time.Duration, iterations int, refused func(why string)) {
	m := &progressMeter{stanzaIter: int64(iterations)}
	owner := nofollow.AnyOwner
	if h.proto.who.uid != 0 && !h.proto.who.self {
		owner = h.proto.who.uid
	}
	warned, lastRefusal := "", ""
	read := func() (rep progressReport, ok bool, err error) {
		err = h.proto.inDir(func(d *nofollow.Dir) error {
			var rerr error
			rep, ok, rerr = readProgress(d, owner)
			return rerr
		})
		return rep, ok, err
	}
	// Read as the task starts, before the workload restores its checkpoint:
	// what the file holds now is the last run's count.
	if rep, ok, err := read(); err == nil && ok {
		m.carried, m.hasCarried = *rep.Iteration, true
	}
	look := func() {
		rep, ok, err := read()
		if err != nil {
			if err.Error() != warned { // once per kind of trouble
				h.logger.Warn("ignoring the task's progress file", "error", err)
				warned = err.Error()
			}
			return
		}
		if !ok {
			return
		}
		if why, rule := m.implausible(rep); rule != "" {
			if rule != lastRefusal {
				h.logger.Warn("refusing an implausible progress report", "reason", why)
				refused(why)
				lastRefusal = rule
			}
			return
		}
		lastRefusal = ""
		rec, changed := m.observe(rep, time.Now())
		if !changed {
			return
		}
		rec.Namespace, rec.JobID, rec.AllocID = h.cfg.Namespace, h.cfg.JobID, h.cfg.AllocID
		rctx, cancel := context.WithTimeout(ctx, consulTimeout)
		defer cancel()
		if err := r.ReportProgress(rctx, rec); err != nil {
			h.logger.Warn("cannot publish the task's progress; retrying", "error", err)
			return
		}
		m.last = rec
	}
	h.every(ctx, period, look)
}

// ReportProgress writes the job's progress record (lease.ProgressKey).
func (c *ConsulLeases) ReportProgress(ctx context.Context, rec lease.ProgressRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	key := lease.ProgressKey(rec.Namespace, rec.JobID)
	if _, err := c.kv.Put(&api.KVPair{Key: key, Value: v}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return driverDenied(fmt.Errorf("write %s: %w", key, err), "write "+key, key, "write")
	}
	return nil
}
