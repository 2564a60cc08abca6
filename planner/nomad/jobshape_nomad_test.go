package nomad

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// The hostile docker job as Nomad 1.11.3's own parser gives it
// (testdata/hostile-docker.json is `nomad job run -output` of
// testdata/hostile-docker.nomad.hcl): each of its shapes is rejected, one
// after the other as the one before is taken out, naming its rule; what is
// left at the end passes.
func TestHostileDockerJobAsNomadParsesIt(t *testing.T) {
	b, err := os.ReadFile("testdata/hostile-docker.json")
	if err != nil {
		t.Fatal(err)
	}
	var wrapped struct{ Job *api.Job }
	if err := json.Unmarshal(b, &wrapped); err != nil {
		t.Fatal(err)
	}
	job := wrapped.Job
	task := job.TaskGroups[0].Tasks[0]
	steps := []struct {
		want string
		fix  func()
	}{
		{`type = "system"`, func() { job.Type = ptr("batch") }},
		{`template "local/env": env = true`, func() { task.Templates = nil }},
		{`env "NVIDIA_VISIBLE_DEVICES"`, func() { task.Env = nil }},
		{`config.devices`, func() { delete(task.Config, "devices") }},
		{`config.runtime = "nvidia"`, func() { delete(task.Config, "runtime") }},
		{`config.privileged`, func() { delete(task.Config, "privileged") }},
		{`config.device_cgroup_rules`, func() { delete(task.Config, "device_cgroup_rules") }},
	}
	for _, s := range steps {
		j, err := ParseJob(job)
		if err != nil {
			t.Fatal(err)
		}
		if j.Err == nil || !strings.Contains(j.Err.Error(), s.want) {
			t.Fatalf("Err = %v, want %q", j.Err, s.want)
		}
		s.fix()
	}
	if j, err := ParseJob(job); err != nil || j.Err != nil {
		t.Fatalf("what is left: %v %v", err, j.Err)
	}
}
