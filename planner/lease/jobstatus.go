package lease

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/themis-nomad/themis/planner/core"
)

// JobStatus is what the planner last decided about a job, under StatusKey,
// for operators (Consul UI under themis/status/) and `themis status`. The
// planner's Consul adapter (planner/consul) reads and writes it.
type JobStatus struct {
	Namespace string `json:"namespace"`
	JobID     string `json:"job_id"`
	// State is queued, granted, revoking (being preempted: checkpointing
	// until Deadline), suspended (preempted, queued again with its
	// checkpoint), rejected, finished, or purged (a held job that Nomad
	// no longer has: the planner keeps its record and waits for it to be
	// submitted again).
	State   string   `json:"state"`
	Reason  string   `json:"reason,omitempty"`
	Node    string   `json:"node,omitempty"`
	GPUs    []string `json:"gpus,omitempty"`
	LeaseID string   `json:"lease_id,omitempty"`
	// Deadline is when a revoking job's grace period ends.
	Deadline time.Time `json:"deadline,omitzero"`
	// Preemptions counts the times the job was preempted.
	Preemptions int       `json:"preemptions,omitempty"`
	Since       time.Time `json:"since"`
	// Held says how the planner holds a waiting job in Nomad (count 0,
	// its version tagged themis-held): the tag's description.
	Held string `json:"held,omitempty"`
	// Driver is the task's driver when it is not the themis driver
	// (docker, exec, raw_exec): no lease check guards its start.
	Driver string `json:"driver,omitempty"`
}

// Key is the job the status is about.
func (s JobStatus) Key() core.JobKey { return core.JobKey{Namespace: s.Namespace, ID: s.JobID} }

// Value is the status as stored at StatusKey(s.Key()): compact JSON.
func (s JobStatus) Value() ([]byte, error) { return json.Marshal(s) }

// MaxReasonBytes bounds the reason a status record carries: a reason
// quotes what a user wrote (a name, a stanza value, Nomad's own message),
// which nothing else bounds.
const MaxReasonBytes = 2048

// BoundReason is reason cut to MaxReasonBytes (at a UTF-8 boundary), saying
// how long it was.
func BoundReason(reason string) string {
	if len(reason) <= MaxReasonBytes {
		return reason
	}
	cut := MaxReasonBytes - 64
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (cut: %d bytes in all)", reason[:cut], len(reason))
}
