package nomad

import (
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// MaxNameBytes bounds a themis job's ID and its groups' and tasks' names.
// Nomad bounds none of them; the planner keys the job's lease, record and
// status in Consul by <namespace>/<job ID> (path escaped: up to three
// times as long, in a request Consul caps at 512 KiB) and the driver its
// checkpoint dir by <namespace>/<job ID>/<group>/<task>, where one path
// component holds at most 255 bytes (NAME_MAX). A longer name would
// make every write about the job fail while a lease held its GPUs: the job
// is rejected naming the limit instead, before any grant.
const MaxNameBytes = 255

// shownName is how an error quotes a name that may be long: at most its
// first 64 bytes, and how long it is.
func shownName(s string) string {
	if len(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:64], len(s))
}

// overlong says which name of job is over MaxNameBytes (nil when none):
// its ID, or the name of a group or a task.
func overlong(job *api.Job) error {
	id := deref(job.ID)
	tooLong := func(what, v string) error {
		return fmt.Errorf("job %s: the %s is %d bytes long; the planner keys the job's records in Consul and its checkpoint dir by it, and takes at most %d bytes: rename it", shownName(id), what, len(v), MaxNameBytes)
	}
	if len(id) > MaxNameBytes {
		return tooLong("job ID", id)
	}
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		if n := deref(tg.Name); len(n) > MaxNameBytes {
			return tooLong("group name", n)
		}
		for _, t := range tg.Tasks {
			if t != nil && len(t.Name) > MaxNameBytes {
				return tooLong("task name", t.Name)
			}
		}
	}
	return nil
}
