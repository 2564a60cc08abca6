package e2e

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/policies"
)

// ignoresSignals is a workload that ignores the checkpoint signal: it must
// be killed at its deadline.
const ignoresSignals = `trap '' INT TERM; while :; do sleep 0.2; done`

// checkpointsSlowly takes 4 s to checkpoint after the signal, then exits 0.
const checkpointsSlowly = `trap 'sleep 4; exit 0' INT TERM; while :; do sleep 0.2; done`

// A workload that ignores the signal is killed at its deadline, and only
// then are its GPUs released and given to the job that preempted it; it is
// queued again, not lost.
func TestSignalIgnoringWorkloadIsKilledAtItsDeadline(t *testing.T) {
	usePolicy(t, "fitgpp")
	be, te := "e2e-deaf-be", "e2e-deaf-te"
	trainJob{gpus: 8, grace: "3s", shell: ignoresSignals}.run(t, be)
	first := waitRunning(t, be, 60*time.Second)
	bel := jobLease(t, be)
	trainJob{gpus: 2, class: "te", steps: 20}.run(t, te)

	// Sample the victim's GPU keys until the TE job holds its lease.
	var revoke *lease.Revoke
	var keysGone time.Time
	eventually(t, 40*time.Second, te+" to be granted", func() (bool, error) {
		if l := jobLease(t, be); l != nil && l.Revoke != nil && revoke == nil {
			revoke = l.Revoke
		}
		if gl := gpuLease(t, bel.GPUs[0]); keysGone.IsZero() && (gl == nil || gl.JobID != be) {
			keysGone = time.Now()
		}
		tel := jobLease(t, te)
		if tel != nil {
			for _, g := range tel.GPUs {
				if gl := gpuLease(t, g); gl == nil || gl.JobID != te {
					t.Fatalf("TE lease on %s but the GPU key says %+v", g, gl)
				}
			}
		}
		return tel != nil, nil
	})
	if revoke == nil {
		t.Fatal("the victim's lease was never marked revoking")
	}
	old := allocInfo(t, first.ID)
	ts := old.TaskStates["hello"]
	if !old.ClientTerminalStatus() {
		t.Fatalf("TE job granted while the victim's allocation is %s", old.ClientStatus)
	}
	if ran := ts.FinishedAt.Sub(revoke.Since); ran < 3*time.Second-500*time.Millisecond || ran > 3*time.Second+2*time.Second {
		t.Errorf("the victim was killed %s after the revoke; want at its 3s grace period's end", ran)
	}
	t.Logf("victim task events: %v", eventTypes(ts.Events))
	if keysGone.IsZero() || keysGone.Before(ts.FinishedAt.Add(-200*time.Millisecond)) {
		t.Errorf("GPU keys released at %s, the victim stopped at %s", keysGone, ts.FinishedAt)
	}
	// Re-queued, not lost: it runs again (from scratch: it never
	// checkpointed) once the TE job is done.
	waitDead(t, te, 60*time.Second)
	eventually(t, 60*time.Second, be+" to run again", func() (bool, error) {
		for _, a := range allocs(t, be) {
			if a.ID != first.ID && a.ClientStatus == "running" {
				return true, nil
			}
		}
		return false, nil
	})
	if r := jobRecord(t, be); r == nil || r.Preemptions != 1 {
		t.Errorf("record of %s: %+v, want 1 preemption", be, r)
	}
}

func eventTypes(evs []*nomadapi.TaskEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// A planner killed (SIGKILL) in the middle of a revoke: the next one
// finishes it from what Consul and Nomad say. The victim is stopped once and
// preempted once, nothing is leased twice, and the TE job gets its GPUs.
func TestPlannerKilledMidRevoke(t *testing.T) {
	if err := stopPlanner(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			startPlanner(plannerSetup{policy: policies.FIFO{}})
		}
	})
	cmd := startPlannerProcess(t, "e2e-doomed", "-policy", "fitgpp", "-max-kill-timeout", "30m", "-http-addr", "127.0.0.1:0")

	be, te := "e2e-killed-be", "e2e-killed-te"
	first := revokingScene(t, be, te)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Logf("killed the planner (pid %d) while %s was revoking", cmd.Process.Pid, be)

	// The next planner (this process's, fitgpp) takes over.
	env.planner = nil
	startPlanner(plannerSetup{policy: mustPolicy(t, "fitgpp"), maxKillTimeout: 30 * time.Minute})
	restarted = true
	t.Cleanup(func() {
		if err := stopPlanner(); err != nil {
			t.Errorf("stop planner: %v", err)
		}
		startPlanner(plannerSetup{policy: policies.FIFO{}})
	})
	eventually(t, 40*time.Second, te+" to be granted", func() (bool, error) {
		tel, bel := jobLease(t, te), jobLease(t, be)
		if tel != nil && bel != nil {
			for _, g := range tel.GPUs {
				if slices.Contains(bel.GPUs, g) {
					t.Fatalf("GPU %s leased to both %s and %s", g, te, be)
				}
			}
		}
		return tel != nil, nil
	})
	old := allocInfo(t, first.ID)
	if !old.ClientTerminalStatus() {
		t.Fatalf("TE job granted while the victim's allocation is %s", old.ClientStatus)
	}
	t.Logf("victim task events: %v", eventTypes(old.TaskStates["hello"].Events))
	waitDead(t, te, 60*time.Second)
	eventually(t, 60*time.Second, be+" to run again", func() (bool, error) {
		n := 0
		for _, a := range allocs(t, be) {
			if a.ID != first.ID && a.ClientStatus == "running" {
				n++
			}
		}
		return n == 1, fmt.Errorf("%d new running allocations", n)
	})
	if r := jobRecord(t, be); r == nil || r.Preemptions != 1 {
		t.Errorf("record of %s: %+v, want exactly 1 preemption", be, r)
	}
	if n := len(allocs(t, be)); n != 2 {
		t.Errorf("%s has %d allocations, want 2 (the stopped one and the resumed one)", be, n)
	}
}

// A job the user stops while it is being revoked is simply released once its
// allocation has stopped; it is not queued again.
func TestJobStoppedWhileRevoking(t *testing.T) {
	usePolicy(t, "fitgpp")
	be, te := "e2e-stopped-be", "e2e-stopped-te"
	first := revokingScene(t, be, te)
	if _, _, err := env.nomad.Jobs().Deregister(be, false, nil); err != nil {
		t.Fatal(err)
	}
	waitLeaseOf(t, te, 30*time.Second)
	if !allocInfo(t, first.ID).ClientTerminalStatus() {
		t.Fatal("TE job granted while the stopped victim still runs")
	}
	eventually(t, 20*time.Second, be+"'s lease and record to go", func() (bool, error) {
		return jobLease(t, be) == nil && jobRecord(t, be) == nil, nil
	})
	waitDead(t, te, 60*time.Second)
	time.Sleep(2 * time.Second) // a round or two after the TE job
	if n := len(allocs(t, be)); n != 1 {
		t.Errorf("%s has %d allocations after it was stopped, want 1", be, n)
	}
	if l := jobLease(t, be); l != nil {
		t.Errorf("%s was granted again after it was stopped: %+v", be, l)
	}
}

// revokingScene runs best-effort job be (checkpointing slowly) on all 8 GPUs,
// submits trial-and-error job te, and returns be's allocation once its lease
// is being revoked (the victim then checkpoints for 4 s).
func revokingScene(t *testing.T, be, te string) *nomadapi.AllocationListStub {
	t.Helper()
	trainJob{gpus: 8, grace: "10s", shell: checkpointsSlowly}.run(t, be)
	first := waitRunning(t, be, 60*time.Second)
	trainJob{gpus: 2, class: "te", steps: 20}.run(t, te)
	eventually(t, 30*time.Second, be+" to be revoked", func() (bool, error) {
		l := jobLease(t, be)
		return l != nil && l.Revoke != nil, nil
	})
	return first
}

// A running job its user resubmits (`nomad job run` again: a new version,
// unpinned, in the pending pool) keeps running under Nomad, which backs out
// an update it cannot place. The planner takes its lease back like a
// preemption (not counted as one): the old version checkpoints and stops,
// and only then is the new version granted and resumed from the checkpoint.
func TestResubmittedRunningJobCheckpointsFirst(t *testing.T) {
	usePolicy(t, "fifo")
	id := "e2e-resubmit"
	trainJob{gpus: 4, grace: "10s", steps: 3000}.run(t, id)
	first := waitRunning(t, id, 60*time.Second)
	old := jobLease(t, id)
	seen := watchLease(t, id)
	// The user's job file again (as `nomad job run` submits it).
	if _, _, err := env.nomad.Jobs().Register(trainJob{gpus: 4, grace: "10s", steps: 3000}.build(t, id), nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, id+" to be granted again", func() (bool, error) {
		l := jobLease(t, id)
		return l != nil && l.LeaseID != old.LeaseID && l.Revoke == nil, nil
	})
	rv := revokeOf(seen())
	if rv == nil || !rv.Resubmitted {
		t.Fatalf("the old lease was not taken back as a resubmission: %+v", rv)
	}
	if !allocInfo(t, first.ID).ClientTerminalStatus() {
		t.Fatal("the new version was granted while the old one still ran")
	}
	ckpt := stepOf(checkpointedRE, taskStdout(t, first.ID))
	if ckpt < 1 {
		t.Fatalf("the old version did not checkpoint:\n%s", taskStdout(t, first.ID))
	}
	waitResumed(t, id, first.ID, ckpt)
	if r := jobRecord(t, id); r == nil || r.Preemptions != 0 {
		t.Errorf("record %+v: a resubmission is not a preemption", r)
	}
}
