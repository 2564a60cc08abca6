package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device"
	"github.com/themis-nomad/themis/driver/checkpoint"
	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/nomad"
)

// execHelloDir is where the exec test puts the hello binary, inside the
// job's own checkpoint dir (which the device plugin mounts at
// /themis-checkpoints): an exec task sees only its chroot (Nomad's
// chroot_env: /bin, /lib, /usr, ...) and its mounts, so hello comes from
// the job's storage, as a user's code would.
const execHelloDir = ".e2e-bin"

// execJob is hello under Nomad's exec driver, with the stanza in meta,
// run from the job's checkpoint dir. It runs as exec's default user,
// nobody (the client's user.denylist refuses root to exec).
func execJob(t testing.TB, id string, steps int, meta map[string]string) *nomadapi.Job {
	t.Helper()
	job := rawExecJob(t, id, steps, meta)
	task := job.TaskGroups[0].Tasks[0]
	task.Driver, task.User = "exec", ""
	task.Config["command"] = nomad.CheckpointMount + "/" + execHelloDir + "/hello"
	return job
}

// skipWithoutExec skips the test unless the dev node's exec driver is
// detected and healthy (root and a cgroup mount: Nomad's drivers/exec
// buildFingerprint).
func skipWithoutExec(t *testing.T) {
	t.Helper()
	stubs, _, err := env.nomad.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stubs {
		if s.Name != "dev-node" {
			continue
		}
		n, _, err := env.nomad.Nodes().Info(s.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch d := n.Drivers["exec"]; {
		case d == nil:
			t.Skip("the client reports no exec driver")
		case !d.Detected || !d.Healthy:
			t.Skipf("the client's exec driver: detected %v, healthy %v (%s)", d.Detected, d.Healthy, d.HealthDescription)
		}
		return
	}
	t.Fatal("no Nomad node dev-node")
}

// An exec job with the stanza in meta is pinned with no volume (the
// device plugin mounts its own job's checkpoint dir at
// /themis-checkpoints), runs on exactly its leased GPUs, is preempted by a
// FitGpp TE job with its grace (kill_signal SIGTERM, kill_timeout 20s),
// checkpoints through the mount to the job's dir on the host, and resumes
// from that checkpoint in a new chroot with its restart count.
func TestExecJobIsScheduledPreemptedAndResumed(t *testing.T) {
	skipWithoutExec(t)
	usePolicy(t, "fitgpp")
	const be, te = "e2e-exec-be", "e2e-exec-te"
	// The job's dir: the device plugin makes it (0777 below root's 0700
	// dirs) when it reserves the job's GPUs; made here first to hold the
	// workload's code, as a user's storage would.
	jobDir := device.JobCheckpointDir(devstack.CheckpointRoot(env.stack.DataDir()), "default", be)
	bin := filepath.Join(jobDir, execHelloDir, "hello")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(env.helloBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	register(t, execJob(t, be, 3000, map[string]string{"themis.gpus": "8", "themis.grace_period": "20s", "themis.checkpoint_signal": "SIGTERM"}))
	// The lease is written before the pin: wait for the pinned version.
	var job *nomadapi.Job
	eventually(t, 60*time.Second, be+" is leased and pinned", func() (bool, error) {
		if jobLease(t, be) == nil {
			return false, fmt.Errorf("no lease")
		}
		j, _, err := env.nomad.Jobs().Info(be, nil)
		if err != nil {
			return false, err
		}
		job = j
		return j.NodePool != nil && *j.NodePool != nomad.DefaultPendingPool, fmt.Errorf("node pool %v", j.NodePool)
	})
	tg, task := job.TaskGroups[0], job.TaskGroups[0].Tasks[0]
	if len(tg.Volumes) != 0 || len(task.VolumeMounts) != 0 {
		t.Fatalf("pinned exec job: volumes %v, mounts %v; want none (no job gets the whole checkpoint root)", tg.Volumes, task.VolumeMounts)
	}
	if task.KillSignal != "SIGTERM" || task.KillTimeout == nil || *task.KillTimeout != 20*time.Second {
		t.Fatalf("pinned exec task: kill_signal %q, kill_timeout %v; want SIGTERM and 20s", task.KillSignal, task.KillTimeout)
	}
	if dir := task.Env["THEMIS_CHECKPOINT_DIR"]; dir != nomad.CheckpointMount+"/train/hello" {
		t.Fatalf("THEMIS_CHECKPOINT_DIR = %q, want %s/train/hello", dir, nomad.CheckpointMount)
	}

	// The chroot is built for each run (about 10 s here).
	first := waitRunning(t, be, 90*time.Second)
	l := jobLease(t, be)
	checkSeesLeased(t, "the exec task", taskStdout(t, first.ID), l.GPUs)
	if st := jobStatus(t, be); st == nil || st.Driver != "exec" {
		t.Fatalf("status %+v: want it to name the exec driver", st)
	}

	trainJob{gpus: 8, class: "te", steps: 30}.run(t, te)
	waitStopped(t, be, first.ID, 60*time.Second)
	out := taskStdout(t, first.ID)
	step := stepOf(checkpointedRE, out)
	if step < 1 {
		t.Fatalf("the exec task did not checkpoint on its kill signal:\n%s", out)
	}
	// The checkpoint went through the mount to the job's dir on the host,
	// not into the task's chroot.
	marker := filepath.Join(jobDir, "train", "hello", fmt.Sprintf("step-%09d", step), checkpoint.Marker)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("checkpoint at step %d not in the job's dir on the host: %v", step, err)
	}
	waitDead(t, te, 60*time.Second)
	waitSecondRun(t, be, first.ID, 90*time.Second, func(s int) bool { return s == step })
}
