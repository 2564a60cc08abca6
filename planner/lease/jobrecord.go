package lease

import (
	"encoding/json"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// JobRecord is a job's scheduling history, under RecordKey: what the
// decision core's service accounting needs (attained service, preemptions,
// first submit) and could not rebuild from Nomad alone. The planner writes
// it when it first sees the job, when a lease of the job ends, and when
// Tiresias promotes it; it deletes it when the job finishes or leaves
// Nomad. The planner's Consul adapter (planner/consul) reads and writes it.
type JobRecord struct {
	Namespace string `json:"namespace"`
	JobID     string `json:"job_id"`
	// FirstSubmit is when the planner first saw the job queued; it orders
	// FIFO queues, as the job's own SubmitTime changes with every pin.
	FirstSubmit time.Time `json:"first_submit"`
	// FirstStart is when the job first ran (zero: never).
	FirstStart time.Time `json:"first_start,omitzero"`
	// Executed is the seconds the job ran under leases that have ended,
	// and Attained the GPU-seconds (Executed x GPUs of each lease).
	Executed float64 `json:"executed_s"`
	Attained float64 `json:"attained_gpu_s"`
	// Preemptions counts the leases taken back from the job.
	Preemptions int `json:"preemptions"`
	// LastLease is the last lease whose service was added, so that a
	// release replayed after a crash is not counted twice.
	LastLease string `json:"last_lease,omitempty"`
	// Suspended is the job version the planner's suspension of LastLease
	// registered (count 0, in the pending pool): the job waits for its next
	// grant only at that version; at any other it is the user's (finished
	// when dead, a new submission otherwise). Nil before planners recorded
	// it (docs/adversary.md, part 3).
	Suspended *JobVersion `json:"suspended,omitempty"`
	// Held is the planner's hold of the job while it waits (queued,
	// suspended or moving): the version it registered with nothing to
	// place, tagged so that Nomad keeps it. Nil when the job is not held
	// (running, or not yet seen waiting); a hold whose version is no
	// longer the job's is undone (its tag removed) and cleared.
	Held *Hold `json:"held,omitempty"`
	// PromotedAt and ExecutedAtPromotion record Tiresias's last starvation
	// promotion, which resets the job's executed and waited counters.
	PromotedAt          time.Time `json:"promoted_at,omitzero"`
	ExecutedAtPromotion float64   `json:"executed_at_promotion_s,omitempty"`

	// index is the record's Consul ModifyIndex when read (0: not in
	// Consul), for check-and-set; it is not part of the value.
	index uint64
}

// Index is the Consul ModifyIndex the record was read at (0: new); a write
// of the record is check-and-set on it.
func (r JobRecord) Index() uint64 { return r.index }

// WithIndex returns r as if read at a Consul ModifyIndex: what the store
// does with each record it lists and each it writes, and what stores that
// stand in for Consul (tests) do.
func WithIndex(r JobRecord, index uint64) JobRecord {
	r.index = index
	return r
}

// Key is the job the record is about.
func (r JobRecord) Key() core.JobKey { return core.JobKey{Namespace: r.Namespace, ID: r.JobID} }

// Value is the record as stored at RecordKey(r.Key()): compact JSON,
// without the index.
func (r JobRecord) Value() ([]byte, error) { return json.Marshal(r) }
