package nomad

import (
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// The whole-job check. The planner moves a granted job into its GPUs' node
// pool with its own token (the pin), so whatever the job asks Nomad for
// goes with it, checked by Nomad against the planner's rights, not the
// user's: a second group's device request, a device "gpu" (any vendor's
// GPUs) next to the themis task's own, a periodic job's launches, each a
// copy of the pinned job. Before a job may be granted, every group and task
// is checked, and a job that asks for devices anywhere but the themis
// task's themis GPU request (which the pin replaces with exactly the
// leased GPUs), whose launches would copy its pin, or that sets in a group
// or task a meta key only the planner writes, is rejected, naming where.
// The pin then rewrites every device request of the job (Pin), so nothing
// it did not write moves with it even if this check missed something.

// PlannerMeta are the meta keys the planner writes, at job level, on the
// jobs it pins and suspends. A user may not set them in a group or task
// (where they would override the job's in the task's environment); at job
// level CheckPlannerMeta checks them against the planner's records.
var PlannerMeta = []string{LeaseMeta, OldLeaseMeta, SuspendedMeta, CountMeta, GangMeta, RestartCountMeta, HeldMeta}

// checkWhole is the whole-job check of job, whose themis task is task in
// group: nil, or the first request the planner's pin would move unleased,
// named by group, task and block.
func checkWhole(job *api.Job, group, task string) error {
	id := deref(job.ID)
	switch {
	case job.Periodic != nil:
		return fmt.Errorf("job %q: periodic block: every launch would be a copy of the job with its pin, on its leased GPUs; a themis job runs once: submit each run as a job of its own", id)
	case job.ParameterizedJob != nil && !job.Dispatched:
		return fmt.Errorf("job %q: parameterized block: every dispatch would be a copy of the job with its pin, on its leased GPUs; a themis job runs once: submit each run as a job of its own", id)
	}
	if err := checkType(job, id); err != nil {
		return err
	}
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		gname := deref(tg.Name)
		if k := plannerKey(tg.Meta); k != "" {
			return fmt.Errorf("job %q group %q: meta %q: only the planner writes it, and only in the job's meta", id, gname, k)
		}
		for _, t := range tg.Tasks {
			if t == nil {
				continue
			}
			where := func() string { return fmt.Sprintf("job %q group %q task %q", id, gname, t.Name) }
			if k := plannerKey(t.Meta); k != "" {
				return fmt.Errorf("%s: meta %q: only the planner writes it, and only in the job's meta", where(), k)
			}
			if err := checkContainer(t, where); err != nil {
				return err
			}
			if t.Resources == nil {
				continue
			}
			themis := gname == group && t.Name == task
			for _, d := range t.Resources.Devices {
				if d == nil {
					continue
				}
				switch {
				case themis && isThemisDevice(d.Name):
					// The pin replaces it with exactly the leased GPUs.
				case themis:
					return fmt.Errorf("%s: device %q: the themis task gets its GPUs from its lease (themis.gpus), which the planner writes as the task's one device request; remove this one", where(), d.Name)
				default:
					return fmt.Errorf("%s: device %q: a themis job gets devices only through the lease of its themis task (group %q task %q); the planner would move this request onto the leased node unchecked: remove it", where(), d.Name, group, task)
				}
			}
		}
		if gname != group {
			return fmt.Errorf("job %q group %q: a themis job has one group, its themis group %q: the pin moves the whole job into the GPUs' node pool and pins only that group to the leased node, so this one would run on any GPU node without a lease: make it a job of its own", id, gname, group)
		}
	}
	return nil
}

// plannerKey is a planner-only key in meta, "" when there is none.
func plannerKey(meta map[string]string) string {
	for _, k := range PlannerMeta {
		if _, ok := meta[k]; ok {
			return k
		}
	}
	return ""
}

// CheckPlannerMeta checks the planner-only keys in the job's own meta of a
// version the planner did not register (its records say which versions it
// did: planner/own.go), before the job may be granted: themis.lease_id
// (themis.lease, as planners before #34 spelt it), themis.gang,
// themis.suspended, themis.count and themis.held are what the planner's
// pin, suspension and hold write, so a version that carries them and is not the
// planner's is a copy of one (`nomad job inspect` of a pinned or suspended
// job, registered again) or a forgery; the planner never reads them back,
// and a job that carries them is rejected, naming the key.
// themis.restart_count is the pin's to overwrite.
func CheckPlannerMeta(j *Job) error {
	meta := j.Job.Meta
	if len(meta) == 0 {
		return nil
	}
	for _, k := range []string{LeaseMeta, OldLeaseMeta, GangMeta, SuspendedMeta, CountMeta, HeldMeta} {
		if v, ok := meta[k]; ok {
			return fmt.Errorf("job %q: meta %q = %q: only the planner writes it, and this version of the job was registered by someone else (a copy of a pinned or suspended version, or a forgery): remove it", j.Key.ID, k, v)
		}
	}
	return nil
}
