package nomad

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/hashicorp/nomad/api"
	"github.com/themis-nomad/themis/planner/spec"
)

// Tasks of other drivers (docker, exec, raw_exec) carry the stanza in meta
// (spec.FromMeta) and are gated, leased, pinned and revoked exactly like
// our driver's. What our driver does at start and stop, the pin does for
// them instead (docs/drivers.md):
//
//   - the checkpoint signal becomes the task's kill_signal, the grace
//     period its kill_timeout (as for every themis task), so a preemption
//     signals the workload and waits the grace before Nomad kills it;
//   - the checkpoint dir: an exec or docker task sees its own job's dir,
//     and no other job's, at CheckpointMount: the themis device plugin
//     mounts it there when it reserves the job's GPUs
//     (device/ckptmount.go), so the pin only names it, <group>/<task>
//     below the mount. A raw_exec task (no filesystem isolation) gets a
//     host path under ForeignCheckpoints.Root, which must be a root its
//     user can write to; a raw_exec task that would run as root is
//     rejected (jobs.go, rawExecUser). The same path for every run of the
//     job, on every node that shares the storage;
//   - THEMIS_CHECKPOINT_DIR, THEMIS_RESTART_COUNT, THEMIS_JOB_ID,
//     THEMIS_VC, THEMIS_CLASS, THEMIS_GPUS and THEMIS_GRACE_PERIOD in the
//     task's env. There is no THEMIS_RESUME_FROM: the planner cannot see
//     the checkpoint dir, so the workload resumes from the newest complete
//     checkpoint it finds there (a subdirectory with a COMPLETE marker,
//     newest marker first: the rule our driver applies);
//   - nothing checks the lease when the task starts: the gate (the pending
//     pool) and the pin alone keep it off GPUs it holds no lease for.

// ForeignCheckpoints says where tasks of other drivers keep checkpoints.
type ForeignCheckpoints struct {
	// Root is the host directory for raw_exec tasks' checkpoint dirs
	// (shared storage across clients for a job to resume on another
	// node); not the themis driver's checkpoint_root, whose dirs are
	// root's: a raw_exec task's user makes its dir here.
	Root string
}

// CheckpointMount is where an exec or docker task sees its job's
// checkpoint dir (the device plugin's mount, device.CheckpointMount).
const CheckpointMount = "/themis-checkpoints"

// DefaultForeignCheckpoints is Root = /var/lib/themis/raw-exec-checkpoints.
func DefaultForeignCheckpoints() ForeignCheckpoints {
	return ForeignCheckpoints{Root: "/var/lib/themis/raw-exec-checkpoints"}
}

// isolated reports whether a driver runs tasks in their own filesystem.
func isolated(driver string) bool { return driver != "raw_exec" }

// legacyCheckpointVolume is the host volume earlier pins mounted at
// CheckpointMount: the whole checkpoint root, every job's dirs. A pin
// takes it out of a job an earlier planner pinned.
const legacyCheckpointVolume = "themis-checkpoints"

// pinForeign gives a foreign task what our driver would: its kill signal,
// checkpoint dir and env.
func (c *Client) pinForeign(j *Job, tg *api.TaskGroup, task *api.Task, restarts int) {
	sig := j.Intent.CheckpointSignal
	task.KillSignal = sig
	if v := tg.Volumes[legacyCheckpointVolume]; v != nil && v.Source == legacyCheckpointVolume {
		delete(tg.Volumes, legacyCheckpointVolume)
		task.VolumeMounts = slices.DeleteFunc(task.VolumeMounts, func(m *api.VolumeMount) bool {
			return m != nil && m.Volume != nil && *m.Volume == legacyCheckpointVolume
		})
	}
	job := path.Join(url.PathEscape(j.Key.Namespace), url.PathEscape(j.Key.ID))
	own := path.Join(url.PathEscape(j.Group), url.PathEscape(j.Task))
	dir := filepath.Join(c.foreign.Root, filepath.FromSlash(job), filepath.FromSlash(own))
	if isolated(j.Driver) {
		dir = path.Join(CheckpointMount, own)
	}
	if task.Env == nil {
		task.Env = map[string]string{}
	}
	task.Env[spec.EnvCheckpointDir] = dir
	task.Env[spec.EnvRestartCount] = strconv.Itoa(restarts)
	task.Env[spec.EnvJobID] = j.Key.ID
	task.Env[spec.EnvVC] = j.Intent.VC
	task.Env[spec.EnvClass] = string(j.Intent.Class)
	task.Env[spec.EnvGPUs] = strconv.Itoa(j.Intent.GPUs)
	task.Env[spec.EnvGracePeriod] = strconv.FormatFloat(j.Intent.GracePeriod.Seconds(), 'f', -1, 64)
}

// rawExecUser refuses a raw_exec themis task that would run as root: raw_exec
// has no filesystem isolation, and runs a task that names no user as the
// Nomad client's user, root, which could read every job's checkpoints (and
// open every GPU). With an unprivileged user the task reaches what that
// user may: the themis driver's and exec/docker jobs' checkpoint dirs are
// not among it (docs/hardening.md). A name the node maps to uid 0 is the
// client's user.denylist's to refuse.
func rawExecUser(driver, user string) error {
	if driver != "raw_exec" || user != "" && user != "root" && user != "0" {
		return nil
	}
	what := "names no user, so it would run as the Nomad client's user (root)"
	if user != "" {
		what = fmt.Sprintf("runs as %q", user)
	}
	return fmt.Errorf("user: a raw_exec themis task %s; raw_exec has no filesystem isolation, so it could read every job's checkpoints: set the task's user to an unprivileged account, or use the themis, exec or docker driver", what)
}
