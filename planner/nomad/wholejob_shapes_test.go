package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// The job shapes that reach past the lease through Nomad's own scheduler or
// the docker driver: a job type Nomad places on every node or lets
// preempt (system, sysbatch), a launch of a periodic job, a second group
// (the pin moves the whole job into the GPU pool, but constrains only the
// themis group to the leased node), and a docker task that names GPUs
// itself (an env template or env setting NVIDIA_VISIBLE_DEVICES, device
// files, a runtime, privileged mode, device cgroup rules). Each is
// rejected naming the rule; the shapes a themis job needs pass.
func TestCheckWholeJobShapes(t *testing.T) {
	ok := []any{map[string]any{"gpus": 2.0}}
	themisGroup := func(ts ...*api.Task) *api.TaskGroup {
		return &api.TaskGroup{Name: ptr("g"), Count: ptr(1), Tasks: ts}
	}
	plain := func() *api.Job { return jobWith(themisGroup(themisTask("t", ok))) }
	typed := func(typ string) *api.Job {
		j := plain()
		j.Type = ptr(typ)
		return j
	}
	docker := func(cfg map[string]any) *api.Task {
		if cfg == nil {
			cfg = map[string]any{}
		}
		cfg["image"] = "train:1"
		return &api.Task{Name: "t", Driver: "docker", Config: cfg, Meta: map[string]string{"themis.gpus": "2"}}
	}
	dockerJob := func(t *api.Task) *api.Job { return jobWith(themisGroup(t)) }
	envTemplate := func(env bool, data string) *api.Task {
		tk := docker(nil)
		tk.Templates = []*api.Template{{EmbeddedTmpl: ptr(data), DestPath: ptr("local/env"), Envvars: ptr(env)}}
		return tk
	}
	cases := []struct {
		name string
		job  *api.Job
		want string // "" = accepted
	}{
		{"no type (Nomad's default, service)", plain(), ""},
		{"batch", typed("batch"), ""},
		{"service", typed("service"), ""},
		{"system", typed("system"), `job "j": type = "system": a themis job is "batch" or "service"`},
		{"sysbatch", typed("sysbatch"), `job "j": type = "sysbatch": a themis job is "batch" or "service"`},
		{"a periodic job's launch", func() *api.Job {
			j := typed("batch")
			j.ID, j.ParentID = ptr("p/periodic-1700000000"), ptr("p")
			return j
		}(), `job "p/periodic-1700000000": a launch of periodic job "p"`},
		{"a dispatched child of a system job", func() *api.Job {
			j := typed("system")
			j.ParentID, j.Dispatched, j.ParameterizedJob = ptr("p"), true, &api.ParameterizedJobConfig{}
			return j
		}(), `type = "system"`},
		{"a dispatched batch child", func() *api.Job {
			j := typed("batch")
			j.ParentID, j.Dispatched, j.ParameterizedJob = ptr("p"), true, &api.ParameterizedJobConfig{}
			return j
		}(), ""},
		{"a second group without devices", jobWith(themisGroup(themisTask("t", ok)),
			&api.TaskGroup{Name: ptr("side"), Tasks: []*api.Task{{Name: "x", Driver: "exec"}}}),
			`job "j" group "side": a themis job has one group, its themis group "g"`},
		{"docker, plain", dockerJob(docker(nil)), ""},
		{"docker, a file template", dockerJob(envTemplate(false, "x")), ""},
		{"docker, runc", dockerJob(docker(map[string]any{"runtime": "runc"})), ""},
		{"docker, an env template", dockerJob(envTemplate(true, "NVIDIA_VISIBLE_DEVICES=all")),
			`job "j" group "g" task "t": template "local/env": env = true in a docker task`},
		{"docker, env NVIDIA_VISIBLE_DEVICES", func() *api.Job {
			tk := docker(nil)
			tk.Env = map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"}
			return dockerJob(tk)
		}(), `job "j" group "g" task "t": env "NVIDIA_VISIBLE_DEVICES"`},
		{"docker, a /dev/nvidia device", dockerJob(docker(map[string]any{"devices": []any{map[string]any{"host_path": "/dev/nvidia0"}}})),
			`job "j" group "g" task "t": config.devices: a docker task of a themis job`},
		{"docker, a device through a link", dockerJob(docker(map[string]any{"devices": []any{map[string]any{"host_path": "/dev/char/195:0"}}})),
			`config.devices`},
		{"docker, runtime nvidia", dockerJob(docker(map[string]any{"runtime": "nvidia"})),
			`job "j" group "g" task "t": config.runtime = "nvidia"`},
		{"docker, privileged", dockerJob(docker(map[string]any{"privileged": true})),
			`job "j" group "g" task "t": config.privileged`},
		{"docker, device cgroup rules", dockerJob(docker(map[string]any{"device_cgroup_rules": []any{"c 195:* rwm"}})),
			`config.device_cgroup_rules`},
		{"a docker sidecar with the nvidia runtime", jobWith(themisGroup(themisTask("t", ok),
			&api.Task{Name: "side", Driver: "docker", Config: map[string]any{"image": "x", "runtime": "nvidia"}})),
			`job "j" group "g" task "side": config.runtime = "nvidia"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parsedAs(t, tc.job, tc.want)
		})
	}
}
