package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// rawExecJob is hello under Nomad's raw_exec driver, with the stanza in
// the task's meta instead of a themis driver config, as nobody (the
// planner refuses a raw_exec themis task that would run as root).
func rawExecJob(t testing.TB, id string, steps int, meta map[string]string) *nomadapi.Job {
	t.Helper()
	job := helloJob(t, id, steps, 1)
	task := job.TaskGroups[0].Tasks[0]
	task.Driver, task.User = "raw_exec", "nobody"
	delete(task.Config, "themis")
	task.Meta = meta
	if task.Resources != nil {
		task.Resources.Devices = nil
	}
	return job
}

// A raw_exec job with the stanza in meta queues, is granted and runs on
// exactly its leased GPUs; a FitGpp TE job preempts it with its grace (the
// pin made the checkpoint signal its kill_signal, the grace its
// kill_timeout), it checkpoints to the dir the pin named, and it resumes
// from that checkpoint with its restart count. A raw_exec job whose meta
// stanza is malformed is rejected naming the field, alone.
func TestRawExecJobIsScheduledPreemptedAndResumed(t *testing.T) {
	usePolicy(t, "fitgpp")
	const be, bad, te = "e2e-raw-be", "e2e-raw-bad", "e2e-raw-te"
	register(t, rawExecJob(t, bad, 10, map[string]string{"themis.gpus": "two"}))
	register(t, rawExecJob(t, be, 3000, map[string]string{"themis.gpus": "8", "themis.grace_period": "20s", "themis.checkpoint_signal": "SIGTERM"}))
	first := waitRunning(t, be, 60*time.Second)
	l := jobLease(t, be)
	checkSeesLeased(t, "the raw_exec task", taskStdout(t, first.ID), l.GPUs)
	job, _, err := env.nomad.Jobs().Info(be, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := job.TaskGroups[0].Tasks[0]
	if task.KillSignal != "SIGTERM" || task.KillTimeout == nil || *task.KillTimeout != 20*time.Second {
		t.Fatalf("pinned raw_exec task: kill_signal %q, kill_timeout %v; want SIGTERM and 20s", task.KillSignal, task.KillTimeout)
	}
	dir := task.Env["THEMIS_CHECKPOINT_DIR"]
	if !strings.HasSuffix(dir, "/default/"+be+"/train/hello") {
		t.Fatalf("THEMIS_CHECKPOINT_DIR = %q", dir)
	}
	if st := jobStatus(t, be); st == nil || st.Driver != "raw_exec" {
		t.Fatalf("status %+v: want it to name the raw_exec driver", st)
	}
	if st := jobStatus(t, bad); st == nil || st.State != "rejected" || !strings.Contains(st.Reason, `themis.gpus: must be a whole number, got "two"`) {
		t.Fatalf("malformed meta stanza: status %+v", st)
	}

	trainJob{gpus: 8, class: "te", steps: 30}.run(t, te)
	waitStopped(t, be, first.ID, 60*time.Second)
	if out := taskStdout(t, first.ID); stepOf(checkpointedRE, out) < 1 {
		t.Fatalf("the raw_exec task did not checkpoint on its kill signal:\n%s", out)
	}
	waitDead(t, te, 60*time.Second)
	waitSecondRun(t, be, first.ID, 60*time.Second, func(step int) bool { return step >= 1 })
}

// waitStopped waits for job's allocation alloc to stop running (its task
// checkpointed on its kill signal and exited).
func waitStopped(t *testing.T, job, alloc string, within time.Duration) {
	t.Helper()
	eventually(t, within, job+" checkpoints and stops", func() (bool, error) {
		if a := allocInfo(t, alloc); a.ClientStatus == "running" {
			return false, fmt.Errorf("still running")
		}
		return true, nil
	})
}

// waitSecondRun waits for a run of job other than the allocation first that
// says it is the task's second run (restart count 1) and resumed from a
// checkpoint step that ok accepts.
func waitSecondRun(t *testing.T, job, first string, within time.Duration, ok func(step int) bool) {
	t.Helper()
	eventually(t, within, job+" resumes", func() (bool, error) {
		for _, a := range allocs(t, job) {
			if a.ID == first || a.ClientStatus != "running" {
				continue
			}
			out, err := readStdout(a.ID)
			if err != nil {
				return false, err
			}
			if strings.Contains(out, "hello: restart count 1") && ok(stepOf(resumedRE, out)) {
				return true, nil
			}
			return false, fmt.Errorf("second run printed:\n%s", out)
		}
		return false, fmt.Errorf("no second run yet")
	})
}
