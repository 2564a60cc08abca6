package nomad

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/spec"
)

func TestPinForeign(t *testing.T) {
	c := &Client{}
	c.SetForeignCheckpoints(ForeignCheckpoints{Root: "/shared/ckpt"})
	in := spec.Intent{GPUs: 2, VC: "research", Class: spec.ClassBestEffort, GracePeriod: 45 * time.Second, CheckpointSignal: "SIGUSR1"}
	cases := []struct {
		driver, dir string
	}{
		{"raw_exec", "/shared/ckpt/default/train%2F1/g/t"},
		// The device plugin mounts the job's own dir at /themis-checkpoints.
		{"exec", "/themis-checkpoints/g/t"},
		{"docker", "/themis-checkpoints/g/t"},
	}
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			j := &Job{Key: core.JobKey{Namespace: "default", ID: "train/1"}, Group: "g", Task: "t", Intent: in, Driver: tc.driver}
			// Pinned by an earlier planner: the whole root as a host volume.
			vol, dest, data := legacyCheckpointVolume, CheckpointMount, "data"
			tg := &api.TaskGroup{Name: ptr("g"), Volumes: map[string]*api.VolumeRequest{
				vol:    {Name: vol, Type: "host", Source: vol},
				"data": {Name: "data", Type: "host", Source: "datasets"},
			}}
			task := &api.Task{Name: "t", Driver: tc.driver, VolumeMounts: []*api.VolumeMount{
				{Volume: &vol, Destination: &dest}, {Volume: &data, Destination: &data}}}
			for range 2 { // a second pin (a resume) changes nothing more
				c.pinForeign(j, tg, task, 3)
			}
			if task.KillSignal != "SIGUSR1" {
				t.Errorf("kill_signal %q", task.KillSignal)
			}
			want := map[string]string{"THEMIS_CHECKPOINT_DIR": tc.dir, "THEMIS_RESTART_COUNT": "3", "THEMIS_JOB_ID": "train/1",
				"THEMIS_VC": "research", "THEMIS_CLASS": "be", "THEMIS_GPUS": "2", "THEMIS_GRACE_PERIOD": "45"}
			for k, v := range want {
				if task.Env[k] != v {
					t.Errorf("env %s = %q, want %q", k, task.Env[k], v)
				}
			}
			// No job is given the whole checkpoint root; its own volumes stay.
			if len(tg.Volumes) != 1 || tg.Volumes["data"] == nil || len(task.VolumeMounts) != 1 || *task.VolumeMounts[0].Volume != "data" {
				t.Fatalf("volumes %v mounts %v; want only the job's own", tg.Volumes, task.VolumeMounts)
			}
		})
	}
}
