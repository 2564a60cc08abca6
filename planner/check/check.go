// Package check is the invariant watcher behind `themis check`: it reads
// Nomad and Consul the way an operator would (the raw KV keys and Nomad's
// jobs and allocations, through the API clients, not through the planner's
// packages: only planner/nomadread, which reads one job whatever its ID,
// is shared) and reports every violation of the invariants in
// docs/invariants.md.
//
//	Reader.Snapshot (Consul KV + Nomad, read consistently) -> Snapshot
//	Check(Snapshot, Tolerances)                             -> []Violation
//	Watcher: Snapshot every interval, remembers revokes, reports new violations
//
// The checks are pure functions of a Snapshot, so each is table-tested
// without agents; the reader is a thin adapter.
package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Kind is what invariant a violation breaks.
type Kind string

const (
	// DoubleLease: a GPU is leased to two jobs (invariant 1).
	DoubleLease Kind = "double-lease"
	// LeaseKeys: a job lease and the GPU keys disagree (a GPU key whose
	// job's lease does not list it, or a leased GPU without its key), so
	// the lease no longer guards the GPU (invariant 1).
	LeaseKeys Kind = "lease-keys"
	// UnleasedGPU: a themis task runs on a GPU its job holds no lease for
	// (invariant 1).
	UnleasedGPU Kind = "unleased-gpu"
	// PartialGang: a multi-node gang has some but not all of its
	// allocations running (invariant 2).
	PartialGang Kind = "partial-gang"
	// GraceCut: a preempted job's task was killed before its grace period
	// ended (invariant 4).
	GraceCut Kind = "grace-cut"
	// LostJob: a themis job is neither queued, running nor finished
	// (invariant 5).
	LostJob Kind = "lost-job"
	// BadKey: a themis key does not decode.
	BadKeyKind Kind = "bad-key"
)

// Violation is one broken invariant.
type Violation struct {
	Kind Kind `json:"kind"`
	// Job is the job concerned, <namespace>/<job>.
	Job   string `json:"job,omitempty"`
	GPU   string `json:"gpu,omitempty"`
	Node  string `json:"node,omitempty"`
	Alloc string `json:"alloc,omitempty"`
	// Since is when the violation began, as far as the snapshot tells.
	Since   time.Time `json:"since"`
	Message string    `json:"message"`
}

// ID identifies a violation across snapshots, so a watcher reports it once.
func (v Violation) ID() string {
	return strings.Join([]string{string(v.Kind), v.Job, v.GPU, v.Node, v.Alloc, v.Since.UTC().Format(time.RFC3339Nano)}, "|")
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", v.Kind)
	if v.Job != "" {
		fmt.Fprintf(&b, " job=%s", v.Job)
	}
	if v.GPU != "" {
		fmt.Fprintf(&b, " gpu=%s", v.GPU)
	}
	if v.Node != "" {
		fmt.Fprintf(&b, " node=%s", v.Node)
	}
	if v.Alloc != "" {
		fmt.Fprintf(&b, " alloc=%s", v.Alloc)
	}
	if !v.Since.IsZero() {
		fmt.Fprintf(&b, " since=%s", v.Since.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, ": %s", v.Message)
	return b.String()
}

// Tolerances are how long a state that is legitimate for a moment may last
// before it is a violation.
type Tolerances struct {
	// Gang: a multi-node gang may run partly (its parts starting or ending
	// one after the other) this long.
	Gang time.Duration
	// Grace: a preempted task killed less than this before its deadline
	// is not reported (the planner's and the client's clocks, rounding).
	Grace time.Duration
	// Lost: a themis job may be neither queued, running nor finished
	// (pinned but not yet placed, between a failed allocation and its
	// reschedule) this long.
	Lost time.Duration
}

// DefaultTolerances are `themis check`'s defaults.
var DefaultTolerances = Tolerances{Gang: 30 * time.Second, Grace: time.Second, Lost: 60 * time.Second}

// Check returns every violation in the snapshot, ordered by kind, job and
// subject.
func Check(s Snapshot, tol Tolerances) []Violation {
	var out []Violation
	out = append(out, checkBadKeys(s)...)
	out = append(out, checkLeases(s)...)
	out = append(out, checkUnleasedGPUs(s)...)
	out = append(out, checkGangs(s, tol)...)
	out = append(out, checkGrace(s, tol)...)
	out = append(out, checkLost(s, tol)...)
	slices.SortStableFunc(out, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Job, b.Job), cmp.Compare(a.GPU, b.GPU),
			cmp.Compare(a.Alloc, b.Alloc), a.Since.Compare(b.Since))
	})
	return out
}

func checkBadKeys(s Snapshot) []Violation {
	var out []Violation
	for _, k := range s.BadKeys {
		out = append(out, Violation{Kind: BadKeyKind, Message: fmt.Sprintf("key %s: %s", k.Key, k.Err)})
	}
	return out
}

// checkLeases (invariant 1, in Consul): every GPU is listed by at most one
// job lease, and the GPU keys agree with the job leases: each leased GPU
// has its key, naming the job and the lease, and each GPU key belongs to a
// job lease that lists the GPU. A grant writes all of a lease's keys in one
// transaction and a release deletes them in one, so there is no moment at
// which they legitimately disagree.
func checkLeases(s Snapshot) []Violation {
	var out []Violation
	byJob := map[Ref]*JobLease{}
	holders := map[string][]*JobLease{}
	for i := range s.JobLeases {
		l := &s.JobLeases[i]
		byJob[l.Ref()] = l
		for _, g := range l.AllGPUs() {
			holders[g] = append(holders[g], l)
		}
	}
	gpuKeys := map[string]*GPULease{}
	for i := range s.GPULeases {
		gpuKeys[s.GPULeases[i].GPU] = &s.GPULeases[i]
	}
	for _, g := range sortedKeys(holders) {
		ls := holders[g]
		if len(ls) > 1 {
			var names []string
			since := time.Time{}
			for _, l := range ls {
				names = append(names, fmt.Sprintf("%s (lease %s, granted %s)", l.Ref(), l.LeaseID, l.GrantedAt.UTC().Format(time.RFC3339)))
				since = later(since, l.GrantedAt)
			}
			out = append(out, Violation{Kind: DoubleLease, Job: ls[len(ls)-1].Ref().String(), GPU: g, Since: since,
				Message: fmt.Sprintf("GPU %s is leased to %d jobs: %s", g, len(ls), strings.Join(names, ", "))})
			continue
		}
		l := ls[0]
		k := gpuKeys[g]
		switch {
		case k == nil:
			out = append(out, Violation{Kind: LeaseKeys, Job: l.Ref().String(), GPU: g, Since: l.GrantedAt,
				Message: fmt.Sprintf("lease %s of %s lists GPU %s, but %s%s is missing: nothing stops a second grant of it", l.LeaseID, l.Ref(), g, GPULeasePath, g)})
		case k.Ref() != l.Ref():
			out = append(out, Violation{Kind: DoubleLease, Job: l.Ref().String(), GPU: g, Since: later(k.GrantedAt, l.GrantedAt),
				Message: fmt.Sprintf("GPU %s is listed by the lease of %s, but its GPU key leases it to %s (lease %s)", g, l.Ref(), k.Ref(), k.LeaseID)})
		case k.LeaseID != l.LeaseID:
			out = append(out, Violation{Kind: LeaseKeys, Job: l.Ref().String(), GPU: g, Since: later(k.GrantedAt, l.GrantedAt),
				Message: fmt.Sprintf("GPU %s: its key is of lease %s, the job lease of %s is lease %s", g, k.LeaseID, l.Ref(), l.LeaseID)})
		}
	}
	for _, g := range sortedKeys(gpuKeys) {
		k := gpuKeys[g]
		if len(holders[g]) > 0 {
			continue // checked above
		}
		l := byJob[k.Ref()]
		msg := fmt.Sprintf("GPU key %s leases GPU %s to %s (lease %s), but that job has no lease", k.Key, g, k.Ref(), k.LeaseID)
		if l != nil {
			msg = fmt.Sprintf("GPU key %s leases GPU %s to %s (lease %s), but the job's lease %s does not list it (%s)",
				k.Key, g, k.Ref(), k.LeaseID, l.LeaseID, strings.Join(l.AllGPUs(), ","))
		}
		out = append(out, Violation{Kind: DoubleLease, Job: k.Ref().String(), GPU: g, Node: k.NodeName, Since: k.GrantedAt, Message: msg})
	}
	return out
}

// checkUnleasedGPUs (invariant 1, in Nomad): every themis GPU Nomad
// allocated to a running task of a themis job is leased to that job: its
// GPU key names the job and the job's lease lists it. A revoking lease
// still holds its GPUs (the victim runs until its deadline).
func checkUnleasedGPUs(s Snapshot) []Violation {
	themis := themisJobs(s)
	gpuKeys := map[string]*GPULease{}
	for i := range s.GPULeases {
		gpuKeys[s.GPULeases[i].GPU] = &s.GPULeases[i]
	}
	leases := leasesByJob(s)
	var out []Violation
	for _, a := range s.Allocs {
		if !a.Running() || !themis[a.Job] {
			continue
		}
		for _, name := range sortedKeys(a.Tasks) {
			t := a.Tasks[name]
			if t.State != "running" {
				continue
			}
			for _, g := range t.GPUs {
				k, l := gpuKeys[g], leases[a.Job]
				var why string
				switch {
				case k == nil:
					why = "no lease at all"
				case k.Ref() != a.Job:
					why = fmt.Sprintf("it is leased to %s (lease %s)", k.Ref(), k.LeaseID)
				case l == nil:
					why = fmt.Sprintf("its GPU key names the job (lease %s) but the job has no job lease", k.LeaseID)
				case !slices.Contains(l.AllGPUs(), g):
					why = fmt.Sprintf("the job's lease %s does not list it", l.LeaseID)
				default:
					continue
				}
				out = append(out, Violation{Kind: UnleasedGPU, Job: a.Job.String(), GPU: g, Node: a.NodeName, Alloc: a.ID,
					Since:   t.StartedAt,
					Message: fmt.Sprintf("task %q of allocation %s runs on GPU %s on node %s: %s", name, short(a.ID), g, a.NodeName, why)})
			}
		}
	}
	return out
}

// checkGangs (invariant 2): a lease of N parts has either none or all N of
// its job's allocations running, except for Tolerances.Gang while the parts
// start or stop one after the other (and, for a lease being revoked, until
// its deadline plus that tolerance).
func checkGangs(s Snapshot, tol Tolerances) []Violation {
	var out []Violation
	for _, l := range s.JobLeases {
		n := len(l.Parts)
		if n < 2 {
			continue
		}
		var running, ended int
		var firstStart, lastEnd time.Time
		for _, a := range s.Allocs {
			if a.Job != l.Ref() {
				continue
			}
			start, end := a.times()
			switch {
			case a.Running():
				running++
				if firstStart.IsZero() || (!start.IsZero() && start.Before(firstStart)) {
					firstStart = start
				}
			case a.Terminal() && !end.Before(l.GrantedAt):
				ended++
				lastEnd = later(lastEnd, end)
			}
		}
		if running == 0 || running == n {
			continue
		}
		// The partial state began when the first running part started
		// or when the last part that ended ended, whichever is later.
		since := later(firstStart, lastEnd)
		if since.IsZero() {
			since = l.GrantedAt
		}
		allowed := since.Add(tol.Gang)
		if l.Revoke != nil {
			allowed = later(allowed, l.Revoke.Deadline.Add(tol.Gang))
		}
		if !s.Now.After(allowed) {
			continue
		}
		out = append(out, Violation{Kind: PartialGang, Job: l.Ref().String(), Since: since,
			Message: fmt.Sprintf("gang lease %s has %d parts but %d of the job's allocations are running (%d ended since the grant), for %s, over the %s tolerance",
				l.LeaseID, n, running, ended, s.Now.Sub(since).Round(time.Second), tol.Gang)})
	}
	return out
}

// checkGrace (invariant 4): a task of a preempted job is not killed before
// its lease's revoke deadline. Only a kill counts: the task's process ended
// by SIGKILL (not the OOM killer) after Nomad began stopping it (a
// "Killing" event) for this revoke. A workload that checkpoints and exits
// early, or exits on the checkpoint signal, got its grace. Only the
// allocations the revoked lease ran are looked at: created after it was
// granted and before it was revoked.
func checkGrace(s Snapshot, tol Tolerances) []Violation {
	var out []Violation
	seen := map[string]bool{}
	for _, r := range s.Revokes {
		if seen[r.LeaseID] {
			continue
		}
		seen[r.LeaseID] = true
		for _, a := range s.Allocs {
			if a.Job != r.Job || a.CreateTime.After(r.Revoke.Since) ||
				(!r.GrantedAt.IsZero() && a.CreateTime.Before(r.GrantedAt.Add(-tol.Grace))) {
				continue
			}
			for _, name := range sortedKeys(a.Tasks) {
				t := a.Tasks[name]
				killing, killed, ok := forcedKill(t.Events, r.Revoke.Since.Add(-tol.Grace))
				if !ok || !killed.Time.Before(r.Revoke.Deadline.Add(-tol.Grace)) {
					continue
				}
				out = append(out, Violation{Kind: GraceCut, Job: r.Job.String(), Node: a.NodeName, Alloc: a.ID, Since: killed.Time,
					Message: fmt.Sprintf("task %q of allocation %s was killed at %s, %s before its grace period ended (revoked at %s, deadline %s, %q); Nomad stopped it with a kill timeout of %s",
						name, short(a.ID), killed.Time.UTC().Format(time.RFC3339Nano), r.Revoke.Deadline.Sub(killed.Time).Round(time.Millisecond),
						r.Revoke.Since.UTC().Format(time.RFC3339), r.Revoke.Deadline.UTC().Format(time.RFC3339), r.Revoke.Reason, killing.KillTimeout)})
			}
		}
	}
	return out
}

// forcedKill finds the first "Killing" event at or after from and the first
// SIGKILL termination after it.
func forcedKill(evs []Event, from time.Time) (killing, killed Event, ok bool) {
	found := false
	for _, e := range evs {
		switch {
		case !found && e.Type == EventKilling && !e.Time.Before(from):
			killing, found = e, true
		case found && e.Type == EventTerminated && !e.OOMKilled &&
			(e.Signal == int(syscall.SIGKILL) || e.ExitCode == 128+int(syscall.SIGKILL)):
			return killing, e, true
		}
	}
	return killing, killed, false
}

// Nomad's task event types the checks read.
const (
	EventKilling    = "Killing"
	EventTerminated = "Terminated"
)

// checkLost (invariant 5): every themis job that is not finished (dead or
// stopped in Nomad) is queued (in the pending pool, or its status says
// queued, suspended or rejected) or has an allocation that is pending or
// running, except for Tolerances.Lost after its last change.
func checkLost(s Snapshot, tol Tolerances) []Violation {
	pending := cmp.Or(s.PendingPool, DefaultPendingPool)
	active := map[Ref]bool{}
	lastChange := map[Ref]time.Time{}
	for _, a := range s.Allocs {
		if !a.Terminal() {
			active[a.Job] = true
		}
		lastChange[a.Job] = later(lastChange[a.Job], a.ModifyTime)
	}
	var out []Violation
	for _, j := range s.Jobs {
		if !j.Themis || j.Stop || j.Status == "dead" || j.Pool == pending || active[j.Ref] {
			continue
		}
		st, hasStatus := s.Statuses[j.Ref]
		if hasStatus && slices.Contains([]string{"queued", "suspended", "rejected", "unreadable"}, st.State) {
			continue
		}
		since := later(j.SubmitTime, lastChange[j.Ref])
		if hasStatus {
			since = later(since, st.Since)
		}
		if !s.Now.After(since.Add(tol.Lost)) {
			continue
		}
		state := "no status key"
		if hasStatus {
			state = fmt.Sprintf("status %q", st.State)
		}
		if !s.Records[j.Ref] {
			state += " (and no job record)"
		}
		out = append(out, Violation{Kind: LostJob, Job: j.Ref.String(), Since: since,
			Message: fmt.Sprintf("job is %s in node pool %q with no pending or running allocation and %s, for %s (over the %s tolerance): neither queued, running nor finished",
				j.Status, j.Pool, state, s.Now.Sub(since).Round(time.Second), tol.Lost)})
	}
	return out
}

// times is when the allocation's tasks first started and last finished.
func (a Alloc) times() (start, end time.Time) {
	for _, t := range a.Tasks {
		if !t.StartedAt.IsZero() && (start.IsZero() || t.StartedAt.Before(start)) {
			start = t.StartedAt
		}
		end = later(end, t.FinishedAt)
	}
	if start.IsZero() {
		start = a.CreateTime
	}
	if end.IsZero() {
		end = a.ModifyTime
	}
	return start, end
}

func themisJobs(s Snapshot) map[Ref]bool {
	out := map[Ref]bool{}
	for _, j := range s.Jobs {
		if j.Themis {
			out[j.Ref] = true
		}
	}
	return out
}

func leasesByJob(s Snapshot) map[Ref]*JobLease {
	out := map[Ref]*JobLease{}
	for i := range s.JobLeases {
		out[s.JobLeases[i].Ref()] = &s.JobLeases[i]
	}
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
