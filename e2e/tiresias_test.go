package e2e

import (
	"strings"
	"testing"
	"time"
)

// Tiresias-LAS live: a job demoted past its queue's threshold (40 GPU-s:
// 8 GPUs for 5 s) is preempted for a newer job in the first queue, and
// resumes from its checkpoint once that one is done.
func TestTiresiasDemotedJobIsPreemptedAndResumes(t *testing.T) {
	usePolicy(t, "tiresias-las", "tiresias.queues=40s")
	old, young := "e2e-tiresias-old", "e2e-tiresias-young"
	trainJob{gpus: 8, grace: "10s", steps: 3000}.run(t, old)
	first := waitRunning(t, old, 60*time.Second)
	// Past the threshold: 8 GPUs x 5 s of service, with a margin.
	eventually(t, 60*time.Second, old+" to attain 48 GPU-seconds", func() (bool, error) {
		return stepOf(lastStepRE, taskStdout(t, first.ID)) >= 60, nil
	})
	seen := watchLease(t, old)
	trainJob{gpus: 8, steps: 20}.run(t, young)

	waitLeaseOf(t, young, 30*time.Second)
	rv := revokeOf(seen())
	if rv == nil {
		t.Fatalf("%s's lease was never marked revoking", old)
	}
	if !strings.Contains(rv.Reason, "tiresias-las") || !strings.Contains(rv.Reason, young) {
		t.Errorf("revoke reason %q does not name both the policy and the job it makes room for", rv.Reason)
	}
	ckpt := stepOf(checkpointedRE, taskStdout(t, first.ID))
	if ckpt < 60 {
		t.Fatalf("the old job checkpointed at step %d; stdout:\n%s", ckpt, taskStdout(t, first.ID))
	}
	waitDead(t, young, 60*time.Second)
	waitResumed(t, old, first.ID, ckpt)
	if r := jobRecord(t, old); r == nil || r.Preemptions != 1 || r.Attained < 40 {
		t.Errorf("record of %s: %+v, want 1 preemption and at least 40 GPU-s attained", old, r)
	}
}
