package core

import (
	"fmt"
	"strings"
	"time"
)

// JobKey names a job uniquely across namespaces.
type JobKey struct {
	Namespace string
	ID        string
}

func (k JobKey) String() string { return k.Namespace + "/" + k.ID }

// ParseJobKey is the inverse of String: the namespace is what comes before
// the first "/" (Nomad namespaces hold no "/"; job IDs may).
func ParseJobKey(s string) (JobKey, error) {
	ns, id, ok := strings.Cut(s, "/")
	if !ok || ns == "" || id == "" {
		return JobKey{}, fmt.Errorf("job key %q: want <namespace>/<job>", s)
	}
	return JobKey{Namespace: ns, ID: id}, nil
}

// GPU is one leaf cell of the topology.
type GPU struct {
	ID    string
	Index int
	// Path names the cells between the node and the GPU, outermost first,
	// e.g. ["socket0", "switch0", "pair0"]. GPUs that share a longer prefix
	// are closer to each other.
	Path    []string
	Healthy bool
}

// Node is one machine: a node-level cell with its GPUs.
type Node struct {
	ID   string
	Name string
	Rack string
	// Schedulable is false when the node is down, draining or ineligible:
	// its GPUs are not offered to new jobs (running grants stay).
	Schedulable bool
	GPUs        []GPU
	// CPU and Memory are the node's capacity for jobs' CPU and memory
	// demands, in the adapters' units (the simulator: CPUs and GB); 0
	// means the resource is not accounted on this node.
	CPU, Memory float64
	// GangAddr is the address the node's themis driver published for the
	// parts of multi-node gangs ("" where none): a lease's part names it,
	// and the gang's ranks accept the part's rendezvous record only from it.
	GangAddr string
}

// Phase is where a job is in its life, as the adapters observe it.
type Phase int

const (
	// Queued jobs wait for a grant.
	Queued Phase = iota
	// Granted jobs hold a grant (placed, starting or running).
	Granted
	// Finished jobs are done, stopped or gone; their grant is released.
	Finished
)

func (p Phase) String() string {
	switch p {
	case Queued:
		return "queued"
	case Granted:
		return "granted"
	case Finished:
		return "finished"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// Job is a gang: it gets all its GPUs or none.
type Job struct {
	Key  JobKey
	GPUs int
	// App names the job's app in the Themis sense (a hyper-parameter
	// sweep's jobs share one); "" means the job is an app of its own.
	App string
	// LaterPhases is how many successive-halving phases of its app follow
	// the job's own (0: none, or not a sweep).
	LaterPhases int
	VC          string
	Class       string
	Priority    int
	// Submitted orders jobs FIFO; Seq breaks ties (the adapters use Nomad's
	// create index, the simulator the trace order).
	Submitted time.Time
	Seq       uint64
	Phase     Phase

	// Service accounting, kept by the adapters (live) or the simulator.
	// Times are seconds.

	// Started reports whether the job ever ran; FirstStart is when it first
	// did (Tiresias orders a queue by it).
	Started bool
	// UntrustedProgress marks a job whose Work and Remaining come from
	// progress reports its workload wrote and the operator does not trust
	// (the live planner's default: a VC config binding's trust_progress
	// says otherwise): Themis's filter ranks its app by the work it has
	// done, as-run, not by what it claims is left (its bids still use the
	// reports; docs/themis.md). The simulator's jobs are trusted.
	// (Next to Started, in the same word.)
	UntrustedProgress bool
	FirstStart        time.Time
	// Attained is the GPU-seconds of service the job received in total.
	Attained float64
	// Executed and Waited are the seconds the job ran and waited since it
	// arrived or was last promoted (Tiresias's t_J and delta_J; a promotion
	// resets both).
	Executed, Waited float64
	// RunRate is how many seconds of Executed (and GPU-seconds of Attained
	// per GPU) the job gains per second it runs, as its adapter accounts:
	// 0 or 1, except live for a multi-node gang, whose parts' run times
	// are summed (planner/account.go). Only core.Steady reads it.
	RunRate float64
	// Work is the job's whole execution time at full speed, when known
	// (Remaining's starting point; an app knows its iterations in all);
	// 0 when unknown.
	Work float64
	// Remaining is the execution time left at full speed, when known
	// (perfect-knowledge baselines); negative when unknown.
	Remaining float64
	// Skew is the job's sensitivity to placement: how much slower it runs
	// when spread (1 = insensitive). Tiresias consolidates jobs whose skew
	// exceeds PACKLIMIT.
	Skew float64
	// CrossRack is the job's slowdown when spread across racks (Skew is
	// across machines of one rack); 0 means Skew.
	CrossRack   float64
	Preemptions int
	// RestoreLeft is how many seconds a running job still spends restoring
	// from its last preemption's checkpoint before it makes progress again.
	// Preemptive policies leave such a job running, so that every resume
	// makes progress before the next preemption.
	RestoreLeft float64
	// CPU and Memory are the job's demands in the nodes' units (0: none).
	// A job with either demand is placed on one node.
	CPU, Memory float64
	// GracePeriod is the seconds a preempted job is given to suspend
	// (checkpoint) before it is stopped; it holds its resources meanwhile.
	GracePeriod float64
	// CheckpointAge is the seconds of execution since the job's newest
	// complete checkpoint: what it would lose, per GPU, if preempted now
	// (LostWork; victims.go). 0 means nothing to lose (it just
	// checkpointed, or the adapter does not know checkpoints: then every
	// job ties and the policy's own order decides). Negative means the job
	// has no complete checkpoint: it would restart from scratch, and loses
	// all of its execution the core knows of (Executed).
	CheckpointAge float64
}

// The job classes of FitGpp (Yabuuchi et al., OpML'19): trial-and-error jobs
// want to start at once; best-effort jobs are the bulk and may be preempted
// for them.
const (
	ClassTrialAndError = "te"
	ClassBestEffort    = "be"
)

// ServiceRate is the GPU-seconds of Attained the job gains per second it
// runs (core.Steady's horizons): its GPUs times RunRate (1 when unset).
func (j *Job) ServiceRate() float64 { return float64(j.GPUs) * max(1, j.RunRate) }

// AttainedSinceReset is the GPU-seconds of service since the job's last
// promotion (Tiresias's W_J x t_J).
func (j *Job) AttainedSinceReset() float64 { return float64(j.GPUs) * j.Executed }

// Grant is a lease of GPUs on one node to one job.
type Grant struct {
	Job  JobKey
	Node string
	GPUs []string
	// at remembers where the GPUs are in the index that placed them, so
	// that a caller handing the grant back with the same index (the
	// simulator, every round) is not looked up by GPU ID again.
	at *gpuAt
}

// gpuAt is the flat slot position of a grant's GPUs in one ClusterIndex,
// and the indexed node of each.
type gpuAt struct {
	x     *ClusterIndex
	pos   []int32
	nodes []int32
}

func (g Grant) String() string {
	return fmt.Sprintf("%s -> %s[%s]", g.Job, g.Node, strings.Join(g.GPUs, ","))
}

// State is everything the core needs to decide.
type State struct {
	Nodes  []Node
	Jobs   []Job
	Grants []Grant
	// Index, when set, is NewClusterIndex(Nodes), built once by a caller
	// whose nodes do not change (the simulator); otherwise Decide builds it.
	Index *ClusterIndex
	// GrantJobs, when set, is for each grant of Grants the index in Jobs
	// of the job that holds it, from a caller that keeps both (the
	// simulator). The caller vouches that no two jobs of Jobs and no two
	// grants share a key; Decide then matches each grant to its job
	// through GrantJobs (checking that the keys agree) rather than by
	// hashing every key, and decides as it would without it. When it does
	// not match Jobs (an index out of range, another key, a job given two
	// grants), Decide matches by key.
	GrantJobs []int
	// Free, when set, is the GPUs that no grant of Grants holds, on Index
	// (Index.Free), kept up to date by a caller that applies every
	// decision (the simulator: FreeGPUs.TakeGrant and Give), its CPU and memory
	// untouched. Decide then starts from a copy of it rather than taking
	// every grant's GPUs out of the whole cluster, when every grant is
	// still held (none is released) and its count of free GPUs agrees.
	Free *FreeGPUs
}

// Action is something the adapters must do.
type Action interface{ action() }

// GrantAction leases GPUs to a queued job and pins it to them.
type GrantAction struct{ Grant Grant }

// ReleaseAction returns a finished job's GPUs.
type ReleaseAction struct{ Grant Grant }

// PreemptAction stops a running job (after its grace period) and puts it
// back in the queue; its grant is released.
type PreemptAction struct{ Grant Grant }

// PromoteAction resets a starving job's service counters (Tiresias's
// starvation promotion): it returns to the highest-priority queue.
type PromoteAction struct{ Job JobKey }

func (GrantAction) action()   {}
func (ReleaseAction) action() {}
func (PreemptAction) action() {}
func (PromoteAction) action() {}

// Wait says why a queued job did not get a grant this round.
type Wait struct {
	Job    JobKey
	Reason string
}

// Decision is the core's answer for one round.
type Decision struct {
	Actions []Action
	Waits   []Wait
}
