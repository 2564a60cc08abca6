// Package lease owns the Consul KV layout themis writes under Root (every
// key: keys.go) and every record stored there: GPU leases, which the
// planner writes and the driver checks (Verify) before it starts a task;
// pending grants, checkpoints, progress and gangs, which the two share; the
// planner's job records (JobRecord) and the statuses it writes for
// operators (JobStatus). Operators read them in Consul's UI under "Key/Value > themis". Leases (JSON):
//
//	themis/leases/gpus/<gpu-id>          one key per leased GPU   -> GPULease
//	themis/leases/jobs/<namespace>/<job> one key per granted job  -> JobLease
//
// A grant writes all of a job's keys in one transaction with check-and-set
// index 0 on every GPU key, so no GPU is leased twice; a release deletes
// them in one. A lease taken back carries a Revoke record and keeps its GPU
// keys until the job's allocation is terminal, so no GPU goes to the next
// job while the victim runs on it (docs/design.md, "Preemption").
package lease

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Root is the KV prefix under which everything themis writes lives.
const Root = "themis/"

const (
	gpuPrefix = Root + "leases/gpus/"
	jobPrefix = Root + "leases/jobs/"
)

// GPUPrefix is the prefix of the per-GPU lease keys.
func GPUPrefix() string { return gpuPrefix }

// JobPrefix is the prefix of the per-job lease keys.
func JobPrefix() string { return jobPrefix }

// GPUKey is the key of one GPU's lease.
func GPUKey(gpuID string) string { return gpuPrefix + url.PathEscape(gpuID) }

// JobKey is the key of one job's lease.
func JobKey(namespace, jobID string) string {
	return jobPrefix + url.PathEscape(namespace) + "/" + url.PathEscape(jobID)
}

// ParseJobKey is the inverse of JobKey.
func ParseJobKey(key string) (namespace, jobID string, err error) {
	rest, ok := strings.CutPrefix(key, jobPrefix)
	if !ok {
		return "", "", fmt.Errorf("lease key %q is not under %q", key, jobPrefix)
	}
	ns, job, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || job == "" {
		return "", "", fmt.Errorf("lease key %q: want %s<namespace>/<job>", key, jobPrefix)
	}
	if namespace, err = url.PathUnescape(ns); err != nil {
		return "", "", fmt.Errorf("lease key %q: namespace: %w", key, err)
	}
	if jobID, err = url.PathUnescape(job); err != nil {
		return "", "", fmt.Errorf("lease key %q: job: %w", key, err)
	}
	return namespace, jobID, nil
}

// GPULease records that one GPU is leased to one job.
type GPULease struct {
	LeaseID   string    `json:"lease_id"`
	Namespace string    `json:"namespace"`
	JobID     string    `json:"job_id"`
	NodeID    string    `json:"node_id"`
	NodeName  string    `json:"node_name"`
	GPU       string    `json:"gpu"`
	VC        string    `json:"vc"`
	GrantedAt time.Time `json:"granted_at"`
}

// JobLease records a job's whole grant: the gang's node and GPUs.
type JobLease struct {
	LeaseID   string    `json:"lease_id"`
	Namespace string    `json:"namespace"`
	JobID     string    `json:"job_id"`
	NodeID    string    `json:"node_id"`
	NodeName  string    `json:"node_name"`
	GPUs      []string  `json:"gpus"`
	VC        string    `json:"vc"`
	GrantedAt time.Time `json:"granted_at"`
	// SubmitIndex is the job's JobModifyIndex when it was granted: a job
	// still at that index was granted but not yet pinned (the planner
	// stopped in between) and is pinned again; a job at a version that is
	// neither that one nor Pinned was resubmitted, and the lease is stale.
	SubmitIndex uint64 `json:"submit_index"`
	// Pinned is the job version the planner's pin of this lease registers
	// (written with the grant, before the pin): the planner takes the job
	// as running under this lease only at that version, never from the
	// job's meta, which its user can write. Nil in a lease written before
	// planners recorded it (docs/adversary.md, part 3).
	Pinned *JobVersion `json:"pinned,omitempty"`
	// Cells are a guaranteed job's virtual GPUs under HiveD (one per GPU,
	// parallel to GPUs): what the planner replays to rebuild the virtual
	// clusters' cell bindings exactly after a restart. Empty otherwise.
	Cells []string `json:"cells,omitempty"`
	// Ends is when the lease ends, for a policy that leases GPUs for a
	// time (Themis): the next auction round takes the GPUs back unless the
	// job wins them again (the lease is then renewed in place). Zero for
	// a lease held until the job ends or is preempted.
	Ends time.Time `json:"ends,omitzero"`
	// Parts, for a gang that spans nodes, are its nodes in rank order, each
	// with its GPUs (equal counts); NodeID and NodeName are then rank 0's,
	// and GPUs all of them, part after part. Empty for a one-node lease.
	Parts []Part `json:"parts,omitempty"`
	// Revoke is set while the planner takes the GPUs back (preemption): the
	// job's allocation is being stopped gracefully and the GPU keys stay
	// until Nomad reports it terminal. Nil for a lease in force.
	Revoke *Revoke `json:"revoke,omitempty"`
	// Counts are the counts the pin gives back to the job's groups other
	// than the themis one, from the hold it was granted out of
	// (Hold.Counts). Empty when none was held.
	Counts map[string]int `json:"counts,omitempty"`
}

// JobVersion names one registration of a Nomad job: the job's CreateIndex
// (new when a purged ID is registered again) and its Version. Nomad numbers
// every registration that changes a job the version after the one it
// replaces (its state store's upsertJobImpl), so a registration that is
// check-and-set on the JobModifyIndex the planner read registers exactly
// the version after the one it read, and no other registration can: what
// the planner writes is known before it writes it.
type JobVersion struct {
	CreateIndex uint64 `json:"create_index"`
	Version     uint64 `json:"version"`
}

// Revoke records a lease being taken back. The task driver reads it when
// Nomad stops the task, to tell the workload why and by when (the notice
// file); operators see it in Consul's UI and `themis status`.
type Revoke struct {
	// Reason says why, e.g. "preempted for default/te-job by fitgpp".
	Reason string `json:"reason"`
	// Since is when the planner decided to revoke.
	Since time.Time `json:"since"`
	// Deadline is Since plus the job's grace period: the workload must have
	// checkpointed and exited by then, or it is killed.
	Deadline time.Time `json:"deadline"`
	// Resubmitted marks a lease taken back because the user resubmitted the
	// running job (a new version): not a preemption, so not counted as one.
	Resubmitted bool `json:"resubmitted,omitempty"`
	// Suspends is the job version the planner's suspension registers
	// (count 0, in the pending pool), written before the suspension: the
	// job counts as suspended only at that version.
	Suspends *JobVersion `json:"suspends,omitempty"`
}

// Part is one node's share of a gang's lease: one allocation of the job
// runs there, on these GPUs, as the gang's rank of the part's position.
type Part struct {
	NodeID   string   `json:"node_id"`
	NodeName string   `json:"node_name"`
	GPUs     []string `json:"gpus"`
	// Addr is the address the part's node's themis driver fingerprinted
	// for gangs (node attribute AttrGangAddress), "" where it published
	// none: the gang's ranks accept a rendezvous record for the part only
	// from this address (any node's driver token may write the records;
	// only the planner writes the lease).
	Addr string `json:"addr,omitempty"`
}

// AttrGangAddress is the themis driver's node attribute naming the
// address the other parts of a multi-node gang reach this node at (its
// advertise_address).
const AttrGangAddress = "driver.themis.gang_address"

// Nodes is the lease's parts: Parts for a multi-node gang, otherwise one
// part of its node and GPUs.
func (j JobLease) Nodes() []Part {
	if len(j.Parts) > 0 {
		return j.Parts
	}
	return []Part{{NodeID: j.NodeID, NodeName: j.NodeName, GPUs: j.GPUs}}
}

// OnNode reports whether the lease holds GPUs on the node.
func (j JobLease) OnNode(nodeID string) bool {
	for _, p := range j.Nodes() {
		if p.NodeID == nodeID {
			return true
		}
	}
	return false
}

// NodeNames is the lease's node names, comma-separated in rank order.
func (j JobLease) NodeNames() string {
	names := make([]string, 0, len(j.Parts))
	for _, p := range j.Nodes() {
		names = append(names, p.NodeName)
	}
	return strings.Join(names, ",")
}

// GPULeases expands a job lease into its per-GPU leases.
func (j JobLease) GPULeases() []GPULease {
	out := make([]GPULease, 0, len(j.GPUs))
	for _, p := range j.Nodes() {
		for _, g := range p.GPUs {
			out = append(out, GPULease{LeaseID: j.LeaseID, Namespace: j.Namespace, JobID: j.JobID,
				NodeID: p.NodeID, NodeName: p.NodeName, GPU: g, VC: j.VC, GrantedAt: j.GrantedAt})
		}
	}
	return out
}

// Verify checks that every GPU a task was given is leased to the task's job.
// leases maps GPU id to its lease; a missing entry means no lease. It is the
// driver's last line of defence for invariant 1: no themis task runs on a GPU
// it holds no lease for.
func Verify(namespace, jobID string, gpus []string, leases map[string]*GPULease) error {
	for _, g := range gpus {
		l := leases[g]
		switch {
		case l == nil:
			return fmt.Errorf("GPU %s has no themis lease (key %s): the planner has not granted it to job %q", g, GPUKey(g), jobID)
		case l.Namespace != namespace || l.JobID != jobID:
			return fmt.Errorf("GPU %s is leased to job %q in namespace %q, not to job %q in namespace %q", g, l.JobID, l.Namespace, jobID, namespace)
		}
	}
	return nil
}
