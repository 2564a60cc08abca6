package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// BenchmarkParseJob is what the planner does once per job version Nomad
// reports (the snapshot keeps parsed jobs until their JobModifyIndex
// changes): find the themis task, validate the stanza and the job's shape,
// and check the whole job (every group, task, device request and meta):
//
//	go test ./planner/nomad -run '^$' -bench ParseJob
func BenchmarkParseJob(b *testing.B) {
	gpus := uint64(2)
	job := &api.Job{ID: ptr("train"), Namespace: ptr("default"), Meta: map[string]string{"owner": "team-a"},
		TaskGroups: []*api.TaskGroup{{Name: ptr("train"), Count: ptr(1), Meta: map[string]string{"run": "7"}, Tasks: []*api.Task{
			{Name: "train", Driver: DriverName, Meta: map[string]string{"lr": "0.1"},
				Config:    map[string]any{"command": "train", "themis": []any{map[string]any{"gpus": 2.0, "class": "be", "grace_period": "30s", "vc": "default"}}},
				Resources: &api.Resources{Devices: []*api.RequestedDevice{{Name: "themis/gpu", Count: &gpus}}}},
			{Name: "logs", Driver: "raw_exec", Config: map[string]any{"command": "tail"}},
		}}}}
	for b.Loop() {
		j, err := ParseJob(job)
		if err != nil || j.Err != nil {
			b.Fatal(err, j.Err)
		}
	}
}
