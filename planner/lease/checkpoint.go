package lease

import (
	"net/url"
	"time"
)

const checkpointPrefix = Root + "checkpoints/"

// CheckpointPrefix is the prefix of the per-job checkpoint records.
func CheckpointPrefix() string { return checkpointPrefix }

// CheckpointKey is the key of one job's checkpoint record.
func CheckpointKey(namespace, jobID string) string {
	return checkpointPrefix + url.PathEscape(namespace) + "/" + url.PathEscape(jobID)
}

// CheckpointRecord is a job's newest complete checkpoint, as the task driver
// saw it in the task's checkpoint dir: the driver writes it when a newer one
// appears, the planner reads it to tell how much work each running job would
// lose if preempted now (checkpoint-aware victims), and deletes it with the
// job's record.
type CheckpointRecord struct {
	Namespace string `json:"namespace"`
	JobID     string `json:"job_id"`
	// Name is the checkpoint's directory name, Time when it was completed
	// (its COMPLETE marker's modification time).
	Name string    `json:"name"`
	Time time.Time `json:"time"`
	// AllocID is the allocation whose task wrote it.
	AllocID string `json:"alloc_id"`
}
