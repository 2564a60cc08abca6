package lease

import (
	"net/url"
	"time"
)

const progressPrefix = Root + "progress/"

// ProgressPrefix is the prefix of the per-job progress records.
func ProgressPrefix() string { return progressPrefix }

// ProgressKey is the key of one job's progress record.
func ProgressKey(namespace, jobID string) string {
	return progressPrefix + url.PathEscape(namespace) + "/" + url.PathEscape(jobID)
}

// ProgressRecord is how far a job has come, as its workload reported it
// through the task driver (the progress file, docs/themis.md): the driver
// writes it when the report changes, the planner reads it to estimate the
// job's remaining time, and deletes it with the job's record.
type ProgressRecord struct {
	Namespace string `json:"namespace"`
	JobID     string `json:"job_id"`
	AllocID   string `json:"alloc_id"`
	// Iteration is the iterations done, Total the iterations planned (the
	// workload's own figure, else the stanza's iterations; 0: unknown).
	Iteration int64 `json:"iteration"`
	Total     int64 `json:"total,omitempty"`
	// Loss is the workload's last reported loss, when it reports one.
	Loss *float64 `json:"loss,omitempty"`
	// Rate is the iterations per second the driver measured over this
	// allocation's run (0 until two reports apart in time).
	Rate float64 `json:"rate,omitempty"`
	// At is when the driver read the report.
	At time.Time `json:"at"`
}

// Remaining is the seconds of work left at the measured rate, or -1 when
// the total or the rate is unknown.
func (p ProgressRecord) Remaining() float64 {
	if p.Total <= 0 || p.Rate <= 0 {
		return -1
	}
	return max(0, float64(p.Total-p.Iteration)/p.Rate)
}
