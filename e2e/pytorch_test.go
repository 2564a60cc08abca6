package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// torchSteps is where the e2e PyTorch jobs finish: about 10 s of training
// alone on this machine's CPU (86k parameters, batch 64, 1 thread).
const torchSteps = 700

// waitTrainStep waits until a running allocation of job id (other than
// skip) printed step at least step, and returns it with its stdout.
func waitTrainStep(t *testing.T, c *nomadapi.Client, id, skip string, step int, within time.Duration) (*nomadapi.AllocationListStub, string) {
	t.Helper()
	var got *nomadapi.AllocationListStub
	var out string
	eventually(t, within, fmt.Sprintf("%s to train past step %d", id, step), func() (bool, error) {
		as, _, err := c.Jobs().Allocations(id, false, nil)
		if err != nil {
			return false, err
		}
		for _, a := range as {
			if a.ID == skip || a.ClientStatus != "running" {
				continue
			}
			o, err := trainStdout(c, a.ID)
			if err != nil {
				return false, err
			}
			steps := curveOf(o).steps()
			if len(steps) > 0 && steps[len(steps)-1] >= step {
				got, out = a, o
				return true, nil
			}
			return false, fmt.Errorf("allocation %s at %v steps", a.ID, len(steps))
		}
		return false, fmt.Errorf("no running allocation")
	})
	return got, out
}

// TestPyTorchJobPreemptedResumesItsCurve: a real PyTorch job
// (examples/pytorch/train.py through the themis_ckpt helper) holds the
// dev node's 8 GPUs; a trial-and-error job arrives and FitGpp preempts it
// mid-epoch. The job gets the notice and its signal, finishes its step,
// checkpoints (model, AdamW state, learning-rate schedule, step; the data
// position is the step) and exits 0; when the TE job is done it resumes
// from that checkpoint. Its curve continues: the step count goes on from
// the checkpoint, the loss does not start over, every loss it printed
// equals the same run's without a preemption, and it ends with the same
// weights, bit for bit.
func TestPyTorchJobPreemptedResumesItsCurve(t *testing.T) {
	needTorch(t)
	usePolicy(t, "fitgpp")
	const be, te = "e2e-torch-be", "e2e-torch-te"
	args := []string{"--log-every", "1"}
	ref := referenceRun(t, 1, torchSteps, args...)
	began := time.Now()
	register(t, torchJob{gpus: 8, grace: "30s", steps: torchSteps, args: args}.build(t, be))
	first, _ := waitTrainStep(t, env.nomad, be, "", 150, 90*time.Second)
	t.Logf("%s: the PyTorch job runs on its 8 GPUs", time.Since(began).Round(time.Millisecond))

	trainJob{gpus: 2, class: "te", steps: 30}.run(t, te)
	preempted := time.Now()
	old := waitAllocDone(t, env.nomad, first.ID, "the preempted PyTorch job")
	before, err := trainStdout(env.nomad, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if old.ClientStatus != "complete" {
		t.Fatalf("the preempted job's allocation ended %s, want complete (checkpointed, exit 0); stderr:\n%s", old.ClientStatus, trainStderr(env.nomad, first.ID))
	}
	ck := trainCkptRE.FindStringSubmatch(before)
	stop := trainStoppingRE.FindStringSubmatch(before)
	if ck == nil || stop == nil {
		t.Fatalf("the preempted job did not checkpoint:\n%s", lastLines(before, 10))
	}
	at, _ := strconv.Atoi(ck[1])
	if at >= torchSteps {
		t.Fatalf("the job finished (step %d) before it was preempted: nothing tested", at)
	}
	if !strings.Contains(stop[1], "fitgpp") {
		t.Errorf("the job stopped for %q; want the notice's reason (preempted by fitgpp)", stop[1])
	}
	if stop[3] == "0" {
		t.Errorf("preempted at an epoch boundary (epoch %s batch 0): the data position is not tested", stop[2])
	}
	t.Logf("%s: preempted at step %d (epoch %s, batch %s of %s): stopped %s after the TE job arrived; its save took %s s (%s bytes)",
		time.Since(began).Round(time.Millisecond), at, stop[2], stop[3], stop[4],
		old.TaskStates["train"].FinishedAt.Sub(preempted).Round(time.Millisecond), ck[2], ck[3])

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
				t.Fatalf("the resumed run failed:\n%s\nstderr:\n%s", lastLines(out, 10), trainStderr(env.nomad, a.ID))
			}
			return a.ClientStatus == "complete", fmt.Errorf("resumed run %s: %s", a.ClientStatus, lastLines(out, 1))
		}
		return false, fmt.Errorf("no second run")
	})
	rs := trainResumedRE.FindStringSubmatch(after)
	if rs == nil || rs[1] != ck[1] {
		t.Fatalf("the second run did not resume from step %d:\n%s", at, lastLines(after, 10))
	}
	t.Logf("%s: resumed from step %d (load %s s) and finished", time.Since(began).Round(time.Millisecond), at, rs[2])
	reference := ref()
	checkContinuity(t, "the PyTorch job", before, after, reference, at)
	writeCurves(t, "single", at, before, after, reference)
}
