package nodesim

import (
	"strconv"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"
)

// DurationMeta is the meta key (job, group or task meta; the task's wins)
// that says how long a simulated task runs, as a Go duration ("90s").
const DurationMeta = "nodesim.duration"

// Duration is how long the allocation's tasks run on a simulated node: the
// longest of its tasks' DurationMeta, else the longest a task's command
// says as hello's flags do (`-steps N -step-time D`: N x D, D 100 ms by
// default); ok is false when no task says.
func Duration(sa *structs.Allocation) (d time.Duration, ok bool) {
	if sa.Job == nil {
		return 0, false
	}
	tg := sa.Job.LookupTaskGroup(sa.TaskGroup)
	if tg == nil {
		return 0, false
	}
	for _, t := range tg.Tasks {
		if v, found := sa.Job.CombinedTaskMeta(tg.Name, t.Name)[DurationMeta]; found {
			if td, err := time.ParseDuration(v); err == nil && td >= 0 {
				d, ok = max(d, td), true
				continue
			}
		}
		if td, found := helloDuration(t.Config); found {
			d, ok = max(d, td), true
		}
	}
	return d, ok
}

// helloDuration reads hello's -steps and -step-time from a task config's
// args.
func helloDuration(config map[string]any) (time.Duration, bool) {
	args, _ := config["args"].([]any)
	steps, step := -1, 100*time.Millisecond
	for i := 0; i+1 < len(args); i++ {
		flag, _ := args[i].(string)
		val, _ := args[i+1].(string)
		switch flag {
		case "-steps", "--steps":
			if n, err := strconv.Atoi(val); err == nil && n >= 0 {
				steps = n
			}
		case "-step-time", "--step-time":
			if st, err := time.ParseDuration(val); err == nil && st >= 0 {
				step = st
			}
		}
	}
	if steps < 0 {
		return 0, false
	}
	return time.Duration(steps) * step, true
}
