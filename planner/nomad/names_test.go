package nomad

import (
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// Nomad does not bound a job ID's length (nor a group's or task's name);
// the planner keys a job's lease, record and status in Consul by its ID
// and its checkpoint dir on disk by all three, so a name over MaxNameBytes
// is rejected naming the limit, and the error quotes only its start (the
// reason is written to Consul too).
func TestNamesAreBounded(t *testing.T) {
	ok := []any{map[string]any{"gpus": 1.0}}
	long := strings.Repeat("x", 400<<10)
	edge := strings.Repeat("y", MaxNameBytes)
	job := func(id, group, task string) *api.Job {
		j := jobWith(&api.TaskGroup{Name: ptr(group), Tasks: []*api.Task{themisTask(task, ok)}})
		j.ID = ptr(id)
		return j
	}
	cases := []struct {
		name string
		job  *api.Job
		want string
	}{
		{"names at the limit", job(edge, edge, edge), ""},
		{"a job ID of 400 KB", job(long, "g", "t"), "the job ID is 409600 bytes long"},
		{"a long group name", job("j", long, "t"), "the group name is 409600 bytes long"},
		{"a long task name", job("j", "g", long), "the task name is 409600 bytes long"},
		{"a long name of a second themis task", func() *api.Job {
			j := job("j", "g", "t")
			j.TaskGroups[0].Tasks = append(j.TaskGroups[0].Tasks, themisTask(long, ok))
			return j
		}(), "the task name is 409600 bytes long"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := parsedAs(t, tc.job, tc.want)
			if tc.want != "" && len(j.Err.Error()) > 1024 {
				t.Fatalf("the error is %d bytes long: it must quote only the start of the name", len(j.Err.Error()))
			}
		})
	}
}
