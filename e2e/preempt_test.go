package e2e

import (
	"slices"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
)

// FitGpp live: two best-effort jobs hold the 8-GPU node; a trial-and-error
// job for 2 GPUs arrives. Exactly one BE job is preempted, the one Equation
// 2 picks (the shorter grace period, though the other came first in FIFO
// order); it checkpoints within its grace period, the TE job starts on its
// GPUs, and the BE job later resumes from the step it checkpointed.
func TestFitGppPreemptsTheJobEquation2Picks(t *testing.T) {
	usePolicy(t, "fitgpp")
	long, short, te := "e2e-fitgpp-be-long", "e2e-fitgpp-be-short", "e2e-fitgpp-te"
	trainJob{gpus: 4, grace: "20s", steps: 3000}.run(t, long)
	waitRunning(t, long, 60*time.Second)
	// The pin makes Nomad give the task its grace period on a stop.
	if j, _, err := env.nomad.Jobs().Info(long, nil); err != nil {
		t.Fatal(err)
	} else if kt := j.TaskGroups[0].Tasks[0].KillTimeout; kt == nil || *kt != 20*time.Second {
		t.Errorf("pinned task's kill_timeout = %v, want the 20s grace period", kt)
	}
	trainJob{gpus: 4, grace: "5s", steps: 3000}.run(t, short)
	first := waitRunning(t, short, 60*time.Second)
	shortLease := jobLease(t, short)
	longSeen, shortSeen := watchLease(t, long), watchLease(t, short)

	trainJob{gpus: 2, class: "te", steps: 30}.run(t, te)
	// The TE job runs on GPUs the victim held, once the victim stopped.
	tel := waitLeaseOf(t, te, 30*time.Second)
	// The victim's lease was marked revoking, with its grace period as the
	// deadline; the other BE job was never touched.
	revoke := revokeOf(shortSeen())
	if revoke == nil {
		t.Fatalf("%s's lease was never marked revoking; versions seen: %+v", short, shortSeen())
	}
	if got := revoke.Deadline.Sub(revoke.Since); got != 5*time.Second {
		t.Errorf("revoke deadline is %s after its start, want the 5s grace period", got)
	}
	if r := revokeOf(longSeen()); r != nil {
		t.Fatalf("%s (longer grace period, first in FIFO order) was revoked too: %+v", long, r)
	}
	for _, g := range tel.GPUs {
		if !slices.Contains(shortLease.GPUs, g) {
			t.Errorf("TE job got GPU %s, which %s did not hold (%v)", g, short, shortLease.GPUs)
		}
	}
	old := allocInfo(t, first.ID)
	if old.ClientStatus != "complete" {
		t.Errorf("victim's allocation ended %s, want complete (checkpointed and exited 0)", old.ClientStatus)
	}
	out := taskStdout(t, first.ID)
	ckpt := stepOf(checkpointedRE, out)
	if ckpt < 1 {
		t.Fatalf("victim did not checkpoint; stdout:\n%s", out)
	}
	if end := old.TaskStates["hello"].FinishedAt; end.After(revoke.Deadline.Add(time.Second)) {
		t.Errorf("victim ran until %s, past its deadline %s", end, revoke.Deadline)
	}
	if l := jobLease(t, long); l == nil || l.Revoke != nil {
		t.Fatalf("%s lost its lease: %+v", long, l)
	}

	// When the TE job is done, the victim resumes from its checkpoint.
	waitDead(t, te, 60*time.Second)
	if tstart := allocInfo(t, onlyRunningOrDone(t, te).ID).TaskStates["hello"].StartedAt; tstart.Before(old.TaskStates["hello"].FinishedAt) {
		t.Errorf("TE task started at %s, before the victim stopped at %s", tstart, old.TaskStates["hello"].FinishedAt)
	}
	waitResumed(t, short, first.ID, ckpt)
	if r := jobRecord(t, short); r == nil || r.Preemptions != 1 || r.Attained <= 0 {
		t.Errorf("record of %s: %+v, want 1 preemption and some attained service", short, r)
	}
	if st := jobStatus(t, short); st == nil || st.State != "granted" || st.Preemptions != 1 {
		t.Errorf("status of %s after resuming: %+v", short, st)
	}
	if r := jobRecord(t, long); r == nil || r.Preemptions != 0 {
		t.Errorf("record of %s: %+v, want no preemption", long, r)
	}
}

// waitLeaseOf waits for a job's lease.
func waitLeaseOf(t *testing.T, id string, timeout time.Duration) *lease.JobLease {
	t.Helper()
	var l *lease.JobLease
	eventually(t, timeout, id+" to be granted", func() (bool, error) {
		l = jobLease(t, id)
		return l != nil && l.Revoke == nil, nil
	})
	return l
}

// onlyRunningOrDone returns a job's one allocation.
func onlyRunningOrDone(t *testing.T, id string) *nomadapi.AllocationListStub {
	t.Helper()
	var as []*nomadapi.AllocationListStub
	eventually(t, 20*time.Second, id+" to have its allocation", func() (bool, error) {
		as = allocs(t, id)
		return len(as) == 1, nil
	})
	return as[0]
}

// waitResumed waits until a later allocation of job id than first says it
// resumed from step ckpt and trains on past it.
func waitResumed(t *testing.T, id, first string, ckpt int) {
	t.Helper()
	eventually(t, 60*time.Second, id+" to resume", func() (bool, error) {
		for _, a := range allocs(t, id) {
			if a.ID == first {
				continue
			}
			out, err := readStdout(a.ID)
			if err != nil {
				return false, err
			}
			if n := stepOf(resumedRE, out); n >= 0 {
				if n != ckpt {
					t.Fatalf("%s resumed from step %d, checkpointed at %d", id, n, ckpt)
				}
				return stepOf(lastStepRE, out) > ckpt, nil
			}
		}
		return false, nil
	})
}
