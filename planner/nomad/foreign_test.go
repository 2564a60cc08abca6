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
		mounted     bool
	}{
		{"raw_exec", "/shared/ckpt/default/train%2F1/g/t", false},
		{"exec", "/themis-checkpoints/default/train%2F1/g/t", true},
		{"docker", "/themis-checkpoints/default/train%2F1/g/t", true},
	}
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			j := &Job{Key: core.JobKey{Namespace: "default", ID: "train/1"}, Group: "g", Task: "t", Intent: in, Driver: tc.driver}
			tg, task := &api.TaskGroup{Name: ptr("g")}, &api.Task{Name: "t", Driver: tc.driver}
			for range 2 { // a second pin (a resume) adds nothing twice
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
			if !tc.mounted {
				if len(tg.Volumes) != 0 || len(task.VolumeMounts) != 0 {
					t.Fatalf("raw_exec got volumes %v mounts %v", tg.Volumes, task.VolumeMounts)
				}
				return
			}
			v := tg.Volumes[DefaultCheckpointVolume]
			if len(tg.Volumes) != 1 || v == nil || v.Type != "host" || v.Source != DefaultCheckpointVolume {
				t.Fatalf("volumes %+v", tg.Volumes)
			}
			if len(task.VolumeMounts) != 1 || *task.VolumeMounts[0].Destination != CheckpointMount {
				t.Fatalf("mounts %+v", task.VolumeMounts)
			}
		})
	}
}
