package check

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The Consul KV layout the watcher reads (docs/design.md, "Consul KV
// layout"). The watcher spells the keys out itself instead of importing the
// planner's packages, so that a bug in how the planner lays out or decodes
// its keys cannot hide from the check.
const (
	Root         = "themis/"
	GPULeasePath = Root + "leases/gpus/"
	JobLeasePath = Root + "leases/jobs/"
	StatusPath   = Root + "status/"
	RecordPath   = Root + "jobs/"
	LeaseMeta    = "themis.lease_id"
	// OldLeaseMeta is LeaseMeta as planners before #34 spelt it.
	OldLeaseMeta  = "themis.lease"
	SuspendedMeta = "themis.suspended"
	// DefaultPendingPool is the node pool in which themis jobs wait.
	DefaultPendingPool = "themis-pending"
	// DriverName is the themis task driver.
	DriverName = "themis"
	// StanzaName is the block of a themis task's config.
	StanzaName = "themis"
)

// Ref names a Nomad job.
type Ref struct{ Namespace, ID string }

func (r Ref) String() string { return r.Namespace + "/" + r.ID }

// Snapshot is what the checks look at: the themis keys in Consul and the
// jobs and allocations in Nomad, read at about the same time, plus what the
// watcher remembers from earlier reads (revokes whose lease is gone).
type Snapshot struct {
	// Now is when the snapshot was taken; tolerances are measured to it.
	Now time.Time
	// PendingPool is the planner's pending node pool.
	PendingPool string
	JobLeases   []JobLease
	GPULeases   []GPULease
	Statuses    map[Ref]Status
	// Records are the jobs with a record (themis/jobs/<ns>/<job>).
	Records map[Ref]bool
	Jobs    []Job
	Allocs  []Alloc
	// Revokes are the revokes seen on job leases, now and (in a watcher)
	// earlier: a victim's lease is deleted once its allocation stopped, so
	// its grace period is checked against what was seen before.
	Revokes []SeenRevoke
	// BadKeys are keys under the themis prefixes that did not decode.
	BadKeys []BadKey
}

// JobLease is a job lease key (themis/leases/jobs/<ns>/<job>), decoded into
// the fields the checks need.
type JobLease struct {
	Key       string    `json:"-"`
	LeaseID   string    `json:"lease_id"`
	Namespace string    `json:"namespace"`
	JobID     string    `json:"job_id"`
	NodeID    string    `json:"node_id"`
	NodeName  string    `json:"node_name"`
	GPUs      []string  `json:"gpus"`
	GrantedAt time.Time `json:"granted_at"`
	// Parts are a multi-node gang's nodes and GPUs, one per node in rank
	// order; empty for a lease on one node.
	Parts  []Part  `json:"parts,omitempty"`
	Revoke *Revoke `json:"revoke,omitempty"`
}

// Part is one node's share of a multi-node gang's lease.
type Part struct {
	NodeID   string   `json:"node_id"`
	NodeName string   `json:"node_name"`
	GPUs     []string `json:"gpus"`
}

// Revoke is a lease being taken back.
type Revoke struct {
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
}

// Ref is the job the lease is for, from its key.
func (l JobLease) Ref() Ref { return Ref{l.Namespace, l.JobID} }

// AllGPUs is every GPU the lease holds: its gpus and its parts' gpus.
func (l JobLease) AllGPUs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(gs []string) {
		for _, g := range gs {
			if !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	add(l.GPUs)
	for _, p := range l.Parts {
		add(p.GPUs)
	}
	return out
}

// GPULease is a GPU lease key (themis/leases/gpus/<gpu>).
type GPULease struct {
	Key string `json:"-"`
	// GPU is the GPU the key is for, from the key.
	GPU       string    `json:"-"`
	LeaseID   string    `json:"lease_id"`
	Namespace string    `json:"namespace"`
	JobID     string    `json:"job_id"`
	NodeID    string    `json:"node_id"`
	NodeName  string    `json:"node_name"`
	GPUField  string    `json:"gpu"`
	GrantedAt time.Time `json:"granted_at"`
}

// Ref is the job the GPU is leased to.
func (g GPULease) Ref() Ref { return Ref{g.Namespace, g.JobID} }

// Status is a job's status record (themis/status/<ns>/<job>).
type Status struct {
	State    string    `json:"state"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
}

// SeenRevoke is a revoke as the watcher saw it on a job lease.
type SeenRevoke struct {
	Job       Ref
	LeaseID   string
	GrantedAt time.Time
	Revoke    Revoke
}

// BadKey is a key that did not decode.
type BadKey struct {
	Key string
	Err string
}

// Job is a Nomad job, reduced to what the checks need.
type Job struct {
	Ref        Ref
	Pool       string
	Status     string // pending, running, dead
	Stop       bool
	SubmitTime time.Time
	Meta       map[string]string
	// Themis says the job is a themis job: a task with the themis driver
	// or a themis stanza, the pending pool, or a themis lease in its meta.
	Themis bool
	// Unreadable says why the job's definition could not be read (""
	// when it was): such a job is taken for a themis job, and its pool
	// is unknown.
	Unreadable string
}

// Alloc is a Nomad allocation, reduced to what the checks need.
type Alloc struct {
	ID           string
	Job          Ref
	NodeID       string
	NodeName     string
	ClientStatus string // pending, running, complete, failed, lost, unknown
	CreateTime   time.Time
	ModifyTime   time.Time
	Tasks        map[string]Task
}

// Running says the allocation's client reports it running.
func (a Alloc) Running() bool { return a.ClientStatus == "running" }

// Terminal says the allocation will not run again.
func (a Alloc) Terminal() bool {
	switch a.ClientStatus {
	case "complete", "failed", "lost":
		return true
	}
	return false
}

// Task is one task of an allocation.
type Task struct {
	State      string // pending, running, dead
	StartedAt  time.Time
	FinishedAt time.Time
	// GPUs are the themis GPUs (device instance IDs) Nomad allocated to
	// the task.
	GPUs   []string
	Events []Event
}

// Event is a task event.
type Event struct {
	Type        string
	Time        time.Time
	Message     string
	ExitCode    int
	Signal      int
	OOMKilled   bool
	KillTimeout time.Duration
}

// DecodeJobLease decodes a job lease key and its value. The key's namespace
// and job must agree with the value's.
func DecodeJobLease(key string, value []byte) (JobLease, error) {
	var l JobLease
	ns, job, err := splitJobKey(key, JobLeasePath)
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(value, &l); err != nil {
		return l, fmt.Errorf("job lease %s: %w", key, err)
	}
	l.Key = key
	if l.Namespace != ns || l.JobID != job {
		return l, fmt.Errorf("job lease %s names job %q in namespace %q", key, l.JobID, l.Namespace)
	}
	if l.LeaseID == "" {
		return l, fmt.Errorf("job lease %s has no lease_id", key)
	}
	if len(l.AllGPUs()) == 0 {
		return l, fmt.Errorf("job lease %s lists no GPUs", key)
	}
	return l, nil
}

// DecodeGPULease decodes a GPU lease key and its value. The key's GPU must
// agree with the value's.
func DecodeGPULease(key string, value []byte) (GPULease, error) {
	var g GPULease
	rest, ok := strings.CutPrefix(key, GPULeasePath)
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return g, fmt.Errorf("GPU lease key %q: want %s<gpu>", key, GPULeasePath)
	}
	gpu, err := url.PathUnescape(rest)
	if err != nil {
		return g, fmt.Errorf("GPU lease key %q: %w", key, err)
	}
	if err := json.Unmarshal(value, &g); err != nil {
		return g, fmt.Errorf("GPU lease %s: %w", key, err)
	}
	g.Key, g.GPU = key, gpu
	if g.GPUField != gpu {
		return g, fmt.Errorf("GPU lease %s is for GPU %q", key, g.GPUField)
	}
	if g.JobID == "" || g.LeaseID == "" {
		return g, fmt.Errorf("GPU lease %s names no job or no lease", key)
	}
	return g, nil
}

// DecodeStatus decodes a status key (themis/status/<ns>/<job>).
func DecodeStatus(key string, value []byte) (Ref, Status, error) {
	var st Status
	ns, job, err := splitJobKey(key, StatusPath)
	if err != nil {
		return Ref{}, st, err
	}
	if err := json.Unmarshal(value, &st); err != nil {
		return Ref{}, st, fmt.Errorf("status %s: %w", key, err)
	}
	return Ref{ns, job}, st, nil
}

// splitJobKey splits <prefix><namespace>/<job> (each path-escaped).
func splitJobKey(key, prefix string) (ns, job string, err error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", "", fmt.Errorf("key %q is not under %q", key, prefix)
	}
	n, j, ok := strings.Cut(rest, "/")
	if !ok || n == "" || j == "" || strings.Contains(j, "/") {
		return "", "", fmt.Errorf("key %q: want %s<namespace>/<job>", key, prefix)
	}
	if ns, err = url.PathUnescape(n); err != nil {
		return "", "", fmt.Errorf("key %q: namespace: %w", key, err)
	}
	if job, err = url.PathUnescape(j); err != nil {
		return "", "", fmt.Errorf("key %q: job: %w", key, err)
	}
	return ns, job, nil
}
