// Package nomad is the planner's thin adapter to Nomad: it reads themis jobs
// and GPU nodes into the decision core's model, watches Nomad's event stream,
// and pins granted jobs to their node and GPUs with job constraints.
package nomad

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/models"
	"github.com/themis-nomad/themis/planner/spec"
)

// DriverName is the task driver whose tasks the planner schedules.
const DriverName = "themis"

// Job is a Nomad job with a themis task, as the planner sees it.
type Job struct {
	Key core.JobKey
	// Job is the full job as Nomad returned it at JobModifyIndex.
	Job   *api.Job
	Group string
	Task  string
	// Intent is the validated themis stanza; valid only when Err is nil.
	Intent spec.Intent
	// Err is a user error in the job (stanza or shape): the job is rejected
	// until the user fixes and resubmits it.
	Err error
	// Driver is the themis task's driver: DriverName, or another driver
	// (docker, exec, raw_exec) whose task carries the stanza in meta.
	Driver string
	// parseErr is what ParseJob found wrong (Err's value before a round
	// adds to it: Reset).
	parseErr error
	// count is the themis group's count as the job gives it: 1 for a job
	// that waits, the parts of a gang the planner pinned, 0 for a job the
	// planner suspended; which one this version must have, the planner
	// knows from its records (CheckCount).
	count *int
}

// Foreign reports whether the job's task runs under another driver than
// ours: nothing checks its lease when it starts, and it checkpoints through
// its kill signal and timeout (docs/drivers.md).
func (j *Job) Foreign() bool { return j.Driver != "" && j.Driver != DriverName }

// metaOf is a task's meta over its group's.
func metaOf(tg *api.TaskGroup, t *api.Task) map[string]string {
	m := map[string]string{}
	for k, v := range tg.Meta {
		m[k] = v
	}
	for k, v := range t.Meta {
		m[k] = v
	}
	return m
}

// ModifyIndex is the Nomad index of the job's last user-visible change.
func (j *Job) ModifyIndex() uint64 { return deref(j.Job.JobModifyIndex) }

// withStatus is j with Nomad's status for the job, a copy: a cached job
// is shared with the snapshots that handed it out before.
func (j *Job) withStatus(status string) *Job {
	nj, aj := *j, *j.Job
	aj.Status = &status
	nj.Job = &aj
	return &nj
}

// Dead reports whether Nomad has the job dead: finished, failed for good,
// stopped, or suspended by the planner (count 0). Which of these it is, the
// planner says from its own records (planner/own.go), never from the job's
// meta, which its user can write.
func (j *Job) Dead() bool { return deref(j.Job.Status) == "dead" }

// Version is the job version Nomad returned.
func (j *Job) Version() lease.JobVersion {
	return lease.JobVersion{CreateIndex: deref(j.Job.CreateIndex), Version: deref(j.Job.Version)}
}

// NextVersion is the version a registration check-and-set on this one
// registers (lease.JobVersion).
func (j *Job) NextVersion() lease.JobVersion {
	v := j.Version()
	v.Version++
	return v
}

// Count is the themis group's count (Nomad's default, 1, when unset).
func (j *Job) Count() int {
	if j.count == nil {
		return 1
	}
	return *j.count
}

// Stopped reports whether the user stopped the job (`nomad job stop`).
func (j *Job) Stopped() bool { return j.Job.Stop != nil && *j.Job.Stop }

// Pool is the job's node pool.
func (j *Job) Pool() string { return deref(j.Job.NodePool) }

// LeaseMeta is the job meta key in which a pinned job records its lease ID.
// OldLeaseMeta is the key planners before #34 wrote it under
// ("themis.lease"): a job they pinned carries only that one.
const (
	LeaseMeta    = spec.MetaLease
	OldLeaseMeta = spec.MetaLeaseOld
)

// MetaLease is the lease ID the job's meta names ("" when none): what the
// planner's pin wrote, or what its user wrote in its place.
func (j *Job) MetaLease() string { return MetaLeaseOf(j.Job.Meta) }

// MetaLeaseOf is the lease ID in job meta: LeaseMeta's, else (a version
// pinned by a planner before #34) OldLeaseMeta's.
func MetaLeaseOf(meta map[string]string) string {
	if id := meta[LeaseMeta]; id != "" {
		return id
	}
	return meta[OldLeaseMeta]
}

// SetLeaseMeta records the lease ID in job meta, under LeaseMeta only:
// the old spelling goes, so that no version carries two lease IDs.
func SetLeaseMeta(meta map[string]string, leaseID string) {
	meta[LeaseMeta] = leaseID
	delete(meta, OldLeaseMeta)
}

// DropLeaseMeta removes the lease ID from job meta, in both spellings.
func DropLeaseMeta(meta map[string]string) {
	delete(meta, LeaseMeta)
	delete(meta, OldLeaseMeta)
}

// Job meta keys the planner writes besides LeaseMeta.
const (
	// SuspendedMeta records, on a job the planner suspended (group count
	// 0), the lease that was taken back. Nomad shows such a job as dead;
	// this key is how the planner tells it from a finished one.
	SuspendedMeta = spec.MetaSuspended
	// CountMeta keeps a suspended group's count, restored at the next pin.
	CountMeta = spec.MetaCount
	// RestartCountMeta tells the task how many times the job was
	// preempted and resumed (the driver's THEMIS_RESTART_COUNT); the
	// driver reads it under the same name.
	RestartCountMeta = spec.MetaRestartCount
	// GangMeta is the number of parts of a pinned multi-node gang: the
	// group's count, which the pin set (the user's count stays 1).
	GangMeta = spec.MetaGang
	// HeldMeta names, on a version the planner holds, the hold its
	// record keeps (lease.Hold.ID): a registration of the same version
	// number by someone else does not carry it.
	HeldMeta = spec.MetaHeld
)

// MetaSuspended is the lease the job's meta names as suspended ("" when
// none): what the planner's suspension wrote, or what its user wrote.
func (j *Job) MetaSuspended() string { return j.Job.Meta[SuspendedMeta] }

// ErrNotThemis marks a job that has no themis task; the planner ignores it.
var ErrNotThemis = errors.New("not a themis job")

// ParseJob finds the themis task of a Nomad job and validates its stanza and
// shape. It returns ErrNotThemis for other jobs; any other error is the
// user's, and names the job, group, task and field.
func ParseJob(job *api.Job) (*Job, error) {
	tj, err := parseJob(job)
	if tj != nil {
		tj.parseErr = tj.Err
	}
	return tj, err
}

// Reset sets Err back to what ParseJob found: the planner adds, each round,
// what it finds wrong with the job from its records and config
// (planner/round.go), which may change from one round to the next.
func (j *Job) Reset() { j.Err = j.parseErr }

func parseJob(job *api.Job) (*Job, error) {
	ns := deref(job.Namespace)
	if ns == "" {
		ns = "default"
	}
	tj := &Job{Key: core.JobKey{Namespace: ns, ID: deref(job.ID)}, Job: job}
	long := overlong(job)
	type loc struct{ group, task string }
	var found []loc
	var groupTask *api.Task
	var group *api.TaskGroup
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		for _, t := range tg.Tasks {
			if t == nil {
				continue
			}
			if t.Driver == DriverName || spec.HasMetaStanza(metaOf(tg, t)) {
				found = append(found, loc{deref(tg.Name), t.Name})
				groupTask, group = t, tg
			}
		}
	}
	switch {
	case len(found) == 0:
		return nil, ErrNotThemis
	case long != nil || len(found) > 1:
		tj.Err = long
		if tj.Err == nil {
			tj.Err = fmt.Errorf("job %q: %d tasks are themis tasks (driver %q or themis.* meta: %s/%s and %s/%s); a themis job has exactly one",
				tj.Key.ID, len(found), DriverName, found[0].group, found[0].task, found[1].group, found[1].task)
		}
		// No one themis group (none the planner can name): the job runs
		// instances as long as any group has a count (Suspend stops them
		// all).
		n := 0
		for _, tg := range job.TaskGroups {
			if tg != nil && (tg.Count == nil || *tg.Count > 0) {
				n++
			}
		}
		tj.count = &n
		return tj, nil
	}
	tj.Driver = groupTask.Driver
	tj.Group, tj.Task = found[0].group, found[0].task
	where := fmt.Sprintf("job %q group %q task %q", tj.Key.ID, tj.Group, tj.Task)
	if err := unkeyable(tj.Key.ID, tj.Group, tj.Task); err != nil {
		tj.Err = fmt.Errorf("%s: %w", where, err)
		return tj, nil
	}
	tj.count = group.Count
	if tj.Foreign() {
		in, _, err := spec.FromMeta(metaOf(group, groupTask))
		if err == nil {
			err = rawExecUser(tj.Driver, groupTask.User)
		}
		if err != nil {
			tj.Err = fmt.Errorf("%s (driver %q, stanza in meta): %w", where, tj.Driver, err)
		} else {
			tj.Intent = in
		}
	} else {
		in, ok, err := spec.FromTaskConfig(groupTask.Config)
		switch {
		case err != nil:
			tj.Err = fmt.Errorf("%s: %w", where, err)
		case !ok:
			tj.Err = fmt.Errorf("%s: uses driver %q but its config has no %q block", where, DriverName, spec.BlockName)
		default:
			tj.Intent = in
		}
	}
	if tj.Err == nil {
		tj.Err = checkWhole(job, tj.Group, tj.Task)
	}
	return tj, nil
}

// CheckCount checks the themis group's count against want, the count the
// planner's records say this version has: 1 for a job the user submitted,
// the parts of a gang the planner pinned, 0 for a job it suspended.
func CheckCount(j *Job, want int) error {
	if c := j.Count(); c != want {
		if want == 1 {
			return fmt.Errorf("job %q group %q task %q: group count = %d; a themis job's group runs one instance (count = 1): a gang larger than a node asks for all its GPUs in themis.gpus, and the planner runs it on several nodes itself",
				j.Key.ID, j.Group, j.Task, c)
		}
		return fmt.Errorf("job %q group %q task %q: group count = %d, where the planner registered %d", j.Key.ID, j.Group, j.Task, c, want)
	}
	return nil
}

// unkeyable says why a job's names cannot be path segments ("" when they
// can). The job's checkpoint dir is <root>/<namespace>/<job>/<group>/<task>
// (the driver refuses "." and ".." there), and its keys in Consul are
// <prefix><namespace>/<job>, path escaped, which Consul's KV API reads by
// path: it cleans dot segments out of the path, and refuses a key that holds
// ".." once unescaped (agent/kvs_endpoint.go, validateKVKey), so the lease
// of a job "x/.." could be written (in a transaction) but never read or
// released.
func unkeyable(id, group, task string) error {
	for _, n := range []struct{ what, v string }{{"job ID", id}, {"group name", group}, {"task name", task}} {
		if n.v == "." || n.v == ".." {
			return fmt.Errorf("the %s %q is a dot segment, which the job's checkpoint dir and its keys in Consul cannot hold: rename it", n.what, n.v)
		}
	}
	if url.PathEscape(id) != id && strings.Contains(id, "..") {
		return fmt.Errorf("the job ID %q holds \"..\" and characters that its key in Consul escapes, a key Consul's KV API refuses to read (path traversal): rename the job", id)
	}
	return nil
}

// ScopedApp is the app a job of namespace ns names app, as the decision
// core and its views know it: "<namespace>:<app>", so that a tenant naming
// another team's app joins neither its auction bid nor its app-level
// ranking (docs/adversary.md). "" (the job is an app of its own) stays "".
// Neither a Nomad namespace nor an app name holds ':' or '/', and a job
// that is its own app is known by "<namespace>/<job>", so no two differ
// only in how they are written.
func ScopedApp(ns, app string) string {
	if app == "" {
		return ""
	}
	return ns + ":" + app
}

// CoreJob converts a valid job to the decision core's model.
func (j *Job) CoreJob(phase core.Phase) core.Job {
	model := models.Of(j.Intent.Model)
	return core.Job{
		Key:       j.Key,
		GPUs:      j.Intent.GPUs,
		App:       ScopedApp(j.Key.Namespace, j.Intent.App),
		Skew:      model.CrossNode,
		CrossRack: model.CrossRack,
		VC:        j.Intent.VC,
		Class:     string(j.Intent.Class),
		Priority:  j.Intent.Priority,
		Submitted: unixNano(deref(j.Job.SubmitTime)),
		Seq:       j.ModifyIndex(),
		Phase:     phase,
		// CPU and memory are not accounted live: nodes report none to
		// the core, and Nomad itself checks them when it places.
		GracePeriod: j.Intent.GracePeriod.Seconds(),
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
