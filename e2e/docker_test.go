package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device"
	"github.com/themis-nomad/themis/driver/checkpoint"
	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/nomad"
)

// The docker tests run themis jobs with the stanza in meta under Nomad's
// docker driver, on the Docker daemon the e2e stack starts for itself
// (devstack: Debian's docker.io, root, cgroups v1), with images built
// here from examples/docker (examples/docker/build.sh; FROM scratch, no
// registry pull).

// needDocker skips the test when the stack runs no Docker daemon, or
// fails it where THEMIS_REQUIRE_DOCKER=1 (CI, which installs docker.io).
func needDocker(t *testing.T) {
	t.Helper()
	if env.noDocker == "" {
		return
	}
	if os.Getenv("THEMIS_REQUIRE_DOCKER") == "1" {
		t.Fatalf("no Docker daemon: %s (THEMIS_REQUIRE_DOCKER=1)", env.noDocker)
	}
	t.Skip("no Docker daemon: " + env.noDocker)
}

// buildImage builds examples/docker/<name> as tag on the stack's daemon.
func buildImage(t *testing.T, name, tag string) {
	t.Helper()
	began := time.Now()
	cmd := exec.Command(filepath.Join(env.root, "examples", "docker", "build.sh"), name, tag)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+env.stack.DockerHost())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("examples/docker/build.sh %s: %v\n%s", name, err, out)
	}
	t.Logf("built image %s from examples/docker/%s in %s", tag, name, time.Since(began).Round(time.Millisecond))
}

// dockerJob is a job of Nomad's docker driver running image with args,
// with the stanza in the task's meta, its task named task.
func dockerJob(t testing.TB, id, task, image string, args []string, meta map[string]string) *nomadapi.Job {
	t.Helper()
	job := rawExecJob(t, id, 1, meta)
	tk := job.TaskGroups[0].Tasks[0]
	// As the image says: hello's image has no passwd to name nobody in.
	tk.Name, tk.Driver, tk.User = task, "docker", ""
	var a []any
	for _, s := range args {
		a = append(a, s)
	}
	// The stack's daemon has no bridge: the job needs no network.
	tk.Config = map[string]any{"image": image, "args": a, "network_mode": "none"}
	mem := 1024
	tk.Resources.MemoryMB = &mem
	return job
}

// checkDockerPin: the pinned docker task has no volume (its own job's
// checkpoint dir reaches it as the device plugin's mount at
// /themis-checkpoints), its grace as kill_timeout, its checkpoint signal
// as kill_signal and its checkpoint dir under the mount.
func checkDockerPin(t *testing.T, id, rel string) {
	t.Helper()
	job, _, err := env.nomad.Jobs().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg, task := job.TaskGroups[0], job.TaskGroups[0].Tasks[0]
	if len(tg.Volumes) != 0 || len(task.VolumeMounts) != 0 {
		t.Fatalf("pinned docker job: volumes %v, mounts %v; want none (no job gets the whole checkpoint root)", tg.Volumes, task.VolumeMounts)
	}
	if task.KillSignal != "SIGTERM" || task.KillTimeout == nil || *task.KillTimeout != 20*time.Second {
		t.Fatalf("pinned docker task: kill_signal %q, kill_timeout %v; want SIGTERM and 20s", task.KillSignal, task.KillTimeout)
	}
	if dir := task.Env["THEMIS_CHECKPOINT_DIR"]; dir != nomad.CheckpointMount+"/"+rel {
		t.Fatalf("THEMIS_CHECKPOINT_DIR = %q, want %s/%s", dir, nomad.CheckpointMount, rel)
	}
	if st := jobStatus(t, id); st == nil || st.Driver != "docker" {
		t.Fatalf("status %+v: want it to name the docker driver", st)
	}
}

// A docker job (hello in an image built from examples/docker/hello) with
// the stanza in meta is pinned with its own job's checkpoint dir, runs on
// exactly its leased GPUs, is preempted by a FitGpp TE job with its grace
// (Nomad's docker driver sends the kill_signal the pin set), checkpoints
// through the mount into its own job's dir on the host, and resumes
// from it in a new container with its restart count.
func TestDockerJobIsScheduledPreemptedAndResumed(t *testing.T) {
	needDocker(t)
	buildImage(t, "hello", "themis-hello:e2e")
	usePolicy(t, "fitgpp")
	const be, te = "e2e-docker-be", "e2e-docker-te"
	rel := "train/hello"
	register(t, dockerJob(t, be, "hello", "themis-hello:e2e", []string{"-steps", "3000", "-step-time", "100ms"},
		map[string]string{"themis.gpus": "8", "themis.grace_period": "20s", "themis.checkpoint_signal": "SIGTERM"}))
	first := waitRunning(t, be, 90*time.Second)
	checkDockerPin(t, be, rel)
	checkSeesLeased(t, "the docker task", taskStdout(t, first.ID), jobLease(t, be).GPUs)

	trainJob{gpus: 8, class: "te", steps: 30}.run(t, te)
	waitStopped(t, be, first.ID, 60*time.Second)
	out := taskStdout(t, first.ID)
	step := stepOf(checkpointedRE, out)
	if step < 1 {
		t.Fatalf("the docker task did not checkpoint on its kill signal:\n%s", out)
	}
	// Through the device plugin's mount, on the host: the job's own dir.
	marker := filepath.Join(device.JobCheckpointDir(devstack.CheckpointRoot(env.stack.DataDir()), "default", be), filepath.FromSlash(rel), fmt.Sprintf("step-%09d", step), checkpoint.Marker)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("checkpoint at step %d not in the job's checkpoint dir on the host: %v", step, err)
	}
	waitDead(t, te, 60*time.Second)
	waitSecondRun(t, be, first.ID, 90*time.Second, func(s int) bool { return s == step })
}

// The PyTorch job in a container (examples/docker/pytorch: train.py and
// the themis_ckpt helper on Debian's python3-torch, its root file system
// copied from this machine, about 650 MB), preempted by FitGpp mid-run and
// resumed: with no THEMIS_RESUME_FROM under docker, the helper finds its
// newest complete checkpoint in the mount by the driver's rule, and the
// run ends as the same run without a preemption. Slow (the image takes
// about 30 s to build): THEMIS_E2E_SLOW=1.
func TestPyTorchDockerJobPreemptedAndResumed(t *testing.T) {
	if os.Getenv("THEMIS_E2E_SLOW") == "" {
		t.Skip("builds a 650 MB image (about 30 s): THEMIS_E2E_SLOW=1")
	}
	needTorch(t)
	needDocker(t)
	buildImage(t, "pytorch", "themis-pytorch:e2e")
	usePolicy(t, "fitgpp")
	const be, te = "e2e-docker-torch", "e2e-docker-torch-te"
	args := []string{"--steps", strconv.Itoa(torchSteps), "--log-every", "1"}
	ref := referenceRun(t, 1, torchSteps, args[2:]...)
	register(t, dockerJob(t, be, "train", "themis-pytorch:e2e", args,
		map[string]string{"themis.gpus": "8", "themis.grace_period": "20s", "themis.checkpoint_signal": "SIGTERM"}))
	first, _ := waitTrainStep(t, env.nomad, be, "", 150, 2*time.Minute)
	checkDockerPin(t, be, "train/train")

	trainJob{gpus: 8, class: "te", steps: 30}.run(t, te)
	old := waitAllocDone(t, env.nomad, first.ID, "the preempted PyTorch container")
	before, err := trainStdout(env.nomad, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	ck := trainCkptRE.FindStringSubmatch(before)
	if old.ClientStatus != "complete" || ck == nil {
		t.Fatalf("the container ended %s without a checkpoint:\n%s\nstderr:\n%s", old.ClientStatus, lastLines(before, 5), trainStderr(env.nomad, first.ID))
	}
	at, _ := strconv.Atoi(ck[1])
	waitDead(t, te, 60*time.Second)
	var after string
	eventually(t, 3*time.Minute, be+" resumes and finishes", func() (bool, error) {
		for _, a := range allocs(t, be) {
			if a.ID == first.ID {
				continue
			}
			out, err := trainStdout(env.nomad, a.ID)
			if err != nil {
				return false, err
			}
			after = out
			if a.ClientStatus == "failed" {
				t.Fatalf("the resumed container failed:\n%s\nstderr:\n%s", lastLines(out, 10), trainStderr(env.nomad, a.ID))
			}
			return a.ClientStatus == "complete", fmt.Errorf("resumed run %s", a.ClientStatus)
		}
		return false, fmt.Errorf("no second run")
	})
	if rs := trainResumedRE.FindStringSubmatch(after); rs == nil || rs[1] != ck[1] {
		t.Fatalf("the second container did not resume from step %d:\n%s", at, lastLines(after, 10))
	}
	checkContinuity(t, "the PyTorch container", before, after, ref(), at)
	if !strings.Contains(after, "train: done") {
		t.Fatal("no final line")
	}
}
