package nomad

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
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
//   - the checkpoint dir: a raw_exec task (no filesystem isolation) gets a
//     host path under ForeignCheckpoints.Root; an exec or docker task gets
//     the host volume ForeignCheckpoints.Volume (which the clients declare)
//     mounted at CheckpointMount. The same path for every run of the job,
//     on every node that shares the storage;
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
	// Root is the host directory for raw_exec tasks' checkpoint dirs (the
	// themis driver's checkpoint_root; shared storage across clients for
	// a job to resume on another node).
	Root string
	// Volume is the name of the client host volume mounted into exec and
	// docker tasks (declared in every client's config, at Root).
	Volume string
}

// Defaults of ForeignCheckpoints: the themis driver's default
// checkpoint_root, and the host volume the dev agents declare.
const DefaultCheckpointVolume = "themis-checkpoints"

// CheckpointMount is where an isolated task sees the checkpoint volume.
const CheckpointMount = "/themis-checkpoints"

// DefaultForeignCheckpoints is Root = $TMPDIR/themis/checkpoints (the
// driver's default checkpoint_root) and Volume = DefaultCheckpointVolume.
func DefaultForeignCheckpoints() ForeignCheckpoints {
	return ForeignCheckpoints{Root: filepath.Join(os.TempDir(), "themis", "checkpoints"), Volume: DefaultCheckpointVolume}
}

// isolated reports whether a driver runs tasks in their own filesystem.
func isolated(driver string) bool { return driver != "raw_exec" }

// pinForeign gives a foreign task what our driver would: its kill signal,
// checkpoint dir and env.
func (c *Client) pinForeign(j *Job, tg *api.TaskGroup, task *api.Task, restarts int) {
	sig := j.Intent.CheckpointSignal
	task.KillSignal = sig
	rel := path.Join(url.PathEscape(j.Key.Namespace), url.PathEscape(j.Key.ID), url.PathEscape(j.Group), url.PathEscape(j.Task))
	dir := filepath.Join(c.foreign.Root, filepath.FromSlash(rel))
	if isolated(j.Driver) {
		dir = path.Join(CheckpointMount, rel)
		found := false
		for _, v := range tg.Volumes {
			found = found || (v != nil && v.Source == c.foreign.Volume)
		}
		if !found {
			if tg.Volumes == nil {
				tg.Volumes = map[string]*api.VolumeRequest{}
			}
			tg.Volumes[c.foreign.Volume] = &api.VolumeRequest{Name: c.foreign.Volume, Type: "host", Source: c.foreign.Volume}
		}
		mounted := false
		for _, m := range task.VolumeMounts {
			mounted = mounted || (m != nil && m.Volume != nil && *m.Volume == c.foreign.Volume)
		}
		if !mounted {
			vol, dest := c.foreign.Volume, CheckpointMount
			task.VolumeMounts = append(task.VolumeMounts, &api.VolumeMount{Volume: &vol, Destination: &dest})
		}
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
