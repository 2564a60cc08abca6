package nomad

import (
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// Job shapes that reach past the lease through Nomad's scheduler or the
// docker driver rather than through a device request (the whole-job check,
// wholejob.go, calls these).
//
// Job types. A themis job is "batch" or "service" (Nomad's default when a
// job names none). A batch job's lease lasts until its task exits, the
// planner revokes it or the user stops the job; a service job's task never
// finishes (Nomad restarts it whatever its exit), so its lease lasts until
// the planner revokes it or the user stops it: a preemptive policy takes its
// GPUs back like those of any job, a non-preemptive one (FIFO) leaves them
// to it. "system" and "sysbatch" jobs are placed by Nomad on every eligible
// node, and Nomad preempts for system jobs by default (its
// preemption_config: system_scheduler_enabled = true): pinned on its leased
// node at a high priority, such a job would evict other tenants'
// allocations there behind the planner's back. They are rejected.
//
// Nomad priority. Nomad preempts only allocations at least 10 priority
// points below the placing job's (batch and service preemption are off by
// default, an operator may turn them on), so the pin writes every pinned
// job's priority as PinPriority: no pinned job outranks another, and none
// outranks a job at Nomad's default priority.
//
// Launches. A periodic job is rejected (wholejob.go), but Nomad launches
// its children all the same, each a copy of it: they are rejected too. A
// dispatched child of a parameterized job is a submission of its own (its
// dispatcher asked for it) and is checked like any job.
//
// Groups. The pin moves the whole job into its GPUs' node pool but
// constrains only the themis group to the leased node, so a second group
// would be placed on any GPU node, with no lease: a themis job has one
// group.
//
// Docker. A docker task reaches GPUs through the NVIDIA container runtime
// and the device files it is given, not only through device requests: an
// env template (rendered after the device plugin's variables, Nomad's
// client/taskenv ordering) or env setting NVIDIA_VISIBLE_DEVICES, device
// files in config.devices (a name under /dev/nvidia, or any link to one:
// none is allowed), config.runtime naming a GPU runtime (the docker driver
// picks the GPU runtime itself for a task with leased GPUs),
// config.privileged, config.device_cgroup_rules. Each is rejected in any
// docker (or podman) task of a themis job; and the pin sets
// NVIDIA_VISIBLE_DEVICES=void in every task but the themis task, so a
// sidecar's image ENV names no GPU either.

// PinPriority is the Nomad priority the pin writes on every pinned job:
// Nomad's default job priority.
const PinPriority = 50

// NoGPUs is the NVIDIA_VISIBLE_DEVICES value the pin gives every task but
// the themis task: the NVIDIA container runtime then mounts no GPU.
const NoGPUs = "void"

// envVisibleDevices is the variable the NVIDIA container runtime reads.
const envVisibleDevices = "NVIDIA_VISIBLE_DEVICES"

// checkType rejects job types and launches a themis job may not be.
func checkType(job *api.Job, id string) error {
	switch typ := deref(job.Type); typ {
	case "", api.JobTypeBatch, api.JobTypeService:
	default:
		return fmt.Errorf("job %q: type = %q: a themis job is \"batch\" or \"service\"; Nomad places %q jobs on every node and preempts other allocations for system jobs, behind the planner's back", id, typ, typ)
	}
	if p := deref(job.ParentID); p != "" && !job.Dispatched {
		return fmt.Errorf("job %q: a launch of periodic job %q: a themis job runs once, and the planner rejects the periodic job and its launches alike: submit each run as a job of its own", id, p)
	}
	return nil
}

// containerDrivers are the drivers whose tasks the rules on container
// settings apply to.
func containerDriver(driver string) bool { return driver == "docker" || driver == "podman" }

// checkContainer rejects a docker (or podman) task's settings that reach
// GPUs the lease does not name; where names the task.
func checkContainer(t *api.Task, where func() string) error {
	if !containerDriver(t.Driver) {
		return nil
	}
	for _, tm := range t.Templates {
		if tm != nil && deref(tm.Envvars) {
			return fmt.Errorf("%s: template %q: env = true in a %s task of a themis job: its variables are rendered on the node after the device plugin's and may set %s to GPUs the lease does not name; set fixed variables in env, or render the file without env", where(), deref(tm.DestPath), t.Driver, envVisibleDevices)
		}
	}
	for k := range t.Env {
		if strings.EqualFold(k, envVisibleDevices) {
			return fmt.Errorf("%s: env %q: a %s task of a themis job sees the GPUs of its lease only, which the device plugin names: remove it", where(), k, t.Driver)
		}
	}
	cfg := t.Config
	if present(cfg["devices"]) {
		return fmt.Errorf("%s: config.devices: a docker task of a themis job gets device files from its lease only (any host path may be a GPU's, or a link to one): remove them", where())
	}
	if rt, _ := cfg["runtime"].(string); rt != "" && rt != "runc" {
		return fmt.Errorf("%s: config.runtime = %q: the docker driver picks the GPU runtime itself for the task with leased GPUs; a task naming a runtime may get GPUs the lease does not name: remove it (or \"runc\")", where(), rt)
	}
	if present(cfg["privileged"]) && cfg["privileged"] != false {
		return fmt.Errorf("%s: config.privileged: a privileged container opens every GPU on the node: a themis job may not be privileged", where())
	}
	if present(cfg["device_cgroup_rules"]) {
		return fmt.Errorf("%s: config.device_cgroup_rules: they would let the container open GPUs the lease does not name: remove them", where())
	}
	return nil
}

// present reports whether a config value is set to something: not nil, not
// an empty list or map.
func present(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case []any:
		return len(v) > 0
	case []map[string]any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	case []string:
		return len(v) > 0
	}
	return true
}

// blindSidecars sets NVIDIA_VISIBLE_DEVICES=void in every task of the job
// but the themis task (the pin's last word on it: a container image's own
// ENV NVIDIA_VISIBLE_DEVICES=all would otherwise reach every GPU of the
// node through a runtime that honours it).
func blindSidecars(job *api.Job, themis *api.Task) {
	for _, g := range job.TaskGroups {
		if g == nil {
			continue
		}
		for _, t := range g.Tasks {
			if t == nil || t == themis {
				continue
			}
			if t.Env == nil {
				t.Env = map[string]string{}
			}
			t.Env[envVisibleDevices] = NoGPUs
		}
	}
}
