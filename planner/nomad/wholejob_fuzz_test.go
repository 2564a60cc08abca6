package nomad

import (
	"encoding/json"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// The whole-job check on any job Nomad's API could hand the planner (the
// fuzzer's JSON decoded as api.Job): it never panics; a job it accepts asks
// for no device but the themis task's themis GPUs, carries no planner meta
// in a group or task and is neither periodic nor parameterized; and the pin
// of an accepted job leaves exactly one device request, the leased GPUs.
//
//	go test ./planner/nomad -run '^$' -fuzz FuzzWholeJobCheck -fuzztime 60s
func FuzzWholeJobCheck(f *testing.F) {
	for _, seed := range []string{
		`{"ID":"j","TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Driver":"themis","Config":{"themis":[{"gpus":2}]}}]}]}`,
		`{"ID":"j","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"themis","Config":{"themis":[{"gpus":1}]},"Resources":{"Devices":[{"Name":"themis/gpu","Count":1}]}}]},
			{"Name":"side","Tasks":[{"Name":"grab","Driver":"raw_exec","Resources":{"Devices":[{"Name":"themis/gpu","Count":4}]}}]}]}`,
		`{"ID":"j","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"raw_exec","Meta":{"themis.gpus":"1"},"Resources":{"Devices":[{"Name":"gpu","Count":2}]}}]}]}`,
		`{"ID":"j","Meta":{"themis.gang":"3"},"TaskGroups":[{"Name":"g","Count":3,"Tasks":[{"Name":"t","Driver":"docker","Meta":{"themis.gpus":"1","themis.lease":"L"}}]}]}`,
		`{"ID":"j","Periodic":{"Spec":"@daily"},"TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"themis","Config":{"themis":[{"gpus":1}]}}]}]}`,
		`{"ID":"j","TaskGroups":[null,{"Name":"g","Tasks":[null,{"Name":"t","Driver":"themis","Config":{"themis":[{"gpus":1}]},"Resources":{"Devices":[null]}}]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var job api.Job
		if json.Unmarshal(raw, &job) != nil {
			return
		}
		j, err := ParseJob(&job)
		if err != nil || j.Err != nil {
			return // not a themis job, or rejected
		}
		if job.Periodic != nil || (job.ParameterizedJob != nil && !job.Dispatched) {
			t.Fatal("accepted a job whose launches copy its pin")
		}
		for _, tg := range job.TaskGroups {
			if tg == nil {
				continue
			}
			if k := plannerKey(tg.Meta); k != "" {
				t.Fatalf("accepted planner meta %s in group %q", k, deref(tg.Name))
			}
			for _, task := range tg.Tasks {
				if task == nil {
					continue
				}
				if k := plannerKey(task.Meta); k != "" {
					t.Fatalf("accepted planner meta %s in task %q", k, task.Name)
				}
				if task.Resources == nil {
					continue
				}
				for _, d := range task.Resources.Devices {
					if d != nil && !(deref(tg.Name) == j.Group && task.Name == j.Task && isThemisDevice(d.Name)) {
						t.Fatalf("accepted device %q in group %q task %q (the themis task is %s/%s)", d.Name, deref(tg.Name), task.Name, j.Group, j.Task)
					}
				}
			}
		}
		l := lease.JobLease{LeaseID: "L", NodeID: "n", NodeName: "node", GPUs: make([]string, max(j.Intent.GPUs, 1))}
		for i := range l.GPUs {
			l.GPUs[i] = "gpu-" + string(rune('a'+i%26))
		}
		c := &Client{foreign: DefaultForeignCheckpoints()}
		if err := rewrite(&job, j, "pin", c.pinChange(j, l, "pool", 0)); err != nil {
			return // the themis task's name is not unique: Nomad refuses such a job
		}
		n := 0
		for _, tg := range job.TaskGroups {
			if tg == nil {
				continue
			}
			for _, task := range tg.Tasks {
				if task != nil && task.Resources != nil {
					n += len(task.Resources.Devices)
				}
			}
		}
		if n != 1 {
			t.Fatalf("the pinned job has %d device requests, want 1", n)
		}
	})
}
