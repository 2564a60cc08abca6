package lease

import (
	"net/url"
	"time"
)

const pendingPrefix = Root + "leases/pending/"

// PendingPrefix is the prefix of the grants that wait for their GPUs.
func PendingPrefix() string { return pendingPrefix }

// PendingKey is the key of one job's pending grant.
func PendingKey(namespace, jobID string) string {
	return pendingPrefix + url.PathEscape(namespace) + "/" + url.PathEscape(jobID)
}

// Pending is a grant a leasing policy (Themis) decided that waits for its
// GPUs: a job still stopping on them (the grant's victim), or the job's
// own allocation checkpointing elsewhere (it moves). The planner records
// it before it acts on the round, treats the job as holding these GPUs
// from the round that decided it (as the simulator does), and leases them
// to the job once they are released: the auction's answer is carried out,
// not decided again. It claims no GPU key: the GPUs are still leased to
// the job that is stopping.
type Pending struct {
	Namespace string `json:"namespace"`
	JobID     string `json:"job_id"`
	// Node is the grant's node ("" for a gang across nodes); GPUs its
	// GPUs, in rank order.
	Node string   `json:"node,omitempty"`
	GPUs []string `json:"gpus"`
	// DecidedAt is the round that decided the grant; Ends the lease end
	// the policy gave it (the lease, when written, ends then too).
	DecidedAt time.Time `json:"decided_at"`
	Ends      time.Time `json:"ends,omitzero"`
}
