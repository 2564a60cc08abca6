package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// slowCheckpoint is a best-effort workload whose checkpoint takes 2 s after
// the stop signal (then it exits 0).
const slowCheckpoint = `trap 'sleep 2; exit 0' INT TERM; while :; do sleep 0.05; done`

// BenchmarkPreemptToRunning measures, with all 8 GPUs held by a best-effort
// job whose checkpoint takes 2 s, the time from a trial-and-error job's
// registration to its task starting (and to Nomad's API showing it running):
// under the planner (fitgpp: revoke,
// suspend, wait for the allocation to end, release, grant, pin) and under
// Nomad's own batch preemption (raw_exec, priority 80 against 20, the same
// workload asking Nomad for the GPUs itself), alternating in one run. It also
// reports the planner's lease gap (victim's task ended -> TE lease written)
// and the victim's resume (its next lease -> its task running). Run with
// -benchtime=10x for ten samples of each:
//
//	THEMIS_AGENTS_DIR=$(e2e/agents/build.sh) \
//	  go test ./e2e -run '^$' -bench PreemptToRunning -benchtime 10x
func BenchmarkPreemptToRunning(b *testing.B) {
	benchRun++
	usePolicy(b, "fitgpp")
	setNomadPreemption(b, true)
	var themis, themisAPI, native, nativeAPI, toRevoke, ckpt, gap, teStart, resume []time.Duration
	for i := 0; i < b.N; i++ {
		s := themisPreemption(b, i)
		themis, themisAPI = append(themis, s.teStarted), append(themisAPI, s.teVisible)
		toRevoke, ckpt = append(toRevoke, s.toRevoke), append(ckpt, s.checkpoint)
		gap, teStart, resume = append(gap, s.leaseGap), append(teStart, s.teStart), append(resume, s.resume)
		started, visible := nativePreemption(b, i)
		native, nativeAPI = append(native, started), append(nativeAPI, visible)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(median(themis)), "themis-te-started-median-ms")
	b.ReportMetric(ms(median(native)), "nomad-te-started-median-ms")
	b.ReportMetric(ms(median(themisAPI)), "themis-te-running-in-api-median-ms")
	b.ReportMetric(ms(median(nativeAPI)), "nomad-te-running-in-api-median-ms")
	b.ReportMetric(ms(median(ckpt)), "be-checkpoint-median-ms")
	b.ReportMetric(ms(median(toRevoke)), "te-submit-to-revoke-median-ms")
	b.ReportMetric(ms(median(gap)), "lease-gap-median-ms")
	b.ReportMetric(ms(median(teStart)), "te-lease-to-task-started-median-ms")
	b.ReportMetric(ms(median(resume)), "be-resume-median-ms")
	b.Logf("themis TE submit->task started: %v", themis)
	b.Logf("nomad  TE submit->task started: %v", native)
	b.Logf("themis TE submit->running in Nomad's API: %v", themisAPI)
	b.Logf("nomad  TE submit->running in Nomad's API: %v", nativeAPI)
	b.Logf("BE checkpoint (revoke -> task ended): %v", ckpt)
	b.Logf("TE submit -> BE revoke: %v", toRevoke)
	b.Logf("lease gap (BE task ended -> TE lease): %v", gap)
	b.Logf("TE lease -> TE task started: %v", teStart)
	b.Logf("BE resume (BE lease -> task running): %v", resume)
}

type preemptSample struct {
	teStarted, teVisible, toRevoke, checkpoint, leaseGap, teStart, resume time.Duration
}

// benchRun numbers the benchmark function's runs (the runner calls it with
// b.N = 1, then 10), so job IDs never repeat.
var benchRun int

func themisPreemption(b *testing.B, i int) preemptSample {
	be, te := fmt.Sprintf("bench-be-%d-%d", benchRun, i), fmt.Sprintf("bench-te-%d-%d", benchRun, i)
	register(b, trainJob{gpus: 8, grace: "10s", shell: slowCheckpoint}.build(b, be))
	first := waitRunning(b, be, 60*time.Second)
	seen := watchLease(b, be)
	var s preemptSample
	submitted := time.Now()
	s.teVisible = submitToRunning(b, trainJob{gpus: 2, class: "te", shell: "sleep 600"}.build(b, te), false)
	s.teStarted = taskStarted(b, te).Sub(submitted)
	tel := jobLease(b, te)
	old := allocInfo(b, first.ID).TaskStates["hello"]
	rv := revokeOf(seen())
	if rv == nil || tel == nil {
		b.Fatalf("no revoke (%v) or no TE lease (%v)", rv, tel)
	}
	s.toRevoke = rv.Since.Sub(submitted)
	s.checkpoint = old.FinishedAt.Sub(rv.Since)
	s.leaseGap = tel.GrantedAt.Sub(old.FinishedAt)
	s.teStart = allocInfo(b, allocs(b, te)[0].ID).TaskStates["hello"].StartedAt.Sub(tel.GrantedAt)
	// The TE job ends; the victim is granted again and resumes.
	deregister(b, te)
	var l2 *nomadapi.AllocationListStub
	eventually(b, 60*time.Second, be+" to resume", func() (bool, error) {
		for _, a := range allocs(b, be) {
			if a.ID != first.ID && a.ClientStatus == "running" {
				l2 = a
				return true, nil
			}
		}
		return false, nil
	})
	bel := jobLease(b, be)
	s.resume = allocInfo(b, l2.ID).TaskStates["hello"].StartedAt.Sub(bel.GrantedAt)
	deregister(b, be)
	return s
}

func nativePreemption(b *testing.B, i int) (started, visible time.Duration) {
	be, te := rawPriority(b, fmt.Sprintf("bench-nbe-%d-%d", benchRun, i), 20, 8), rawPriority(b, fmt.Sprintf("bench-nte-%d-%d", benchRun, i), 80, 2)
	be.TaskGroups[0].Tasks[0].Config["args"] = []any{"-c", slowCheckpoint}
	register(b, be)
	eventually(b, 60*time.Second, *be.ID+" to run", func() (bool, error) {
		for _, a := range allocs(b, *be.ID) {
			if a.ClientStatus == "running" {
				return true, nil
			}
		}
		return false, nil
	})
	submitted := time.Now()
	visible = submitToRunning(b, te, false)
	started = taskStarted(b, *te.ID).Sub(submitted)
	deregister(b, *te.ID)
	deregister(b, *be.ID)
	return started, visible
}

// taskStarted is when the Nomad client started the job's task (its one
// allocation's StartedAt): the workload's process runs from then on. Nomad's
// API shows the allocation running later, by up to a second: a client sends
// a new allocation's first status with its next batch (every fifth 200 ms
// tick) unless the update is urgent (client/client.go, nextBatch).
func taskStarted(tb testing.TB, id string) time.Time {
	tb.Helper()
	as := allocs(tb, id)
	if len(as) != 1 {
		tb.Fatalf("%s has %d allocations, want 1", id, len(as))
	}
	return allocInfo(tb, as[0].ID).TaskStates["hello"].StartedAt
}

// rawPriority is a raw_exec job asking Nomad for GPUs of the themis device
// itself, at a priority, in the default pool: Nomad's own preemption picks
// its victims.
func rawPriority(b *testing.B, id string, priority, gpus int) *nomadapi.Job {
	job := trainJob{gpus: gpus, shell: "sleep 600"}.build(b, id)
	pool := "default"
	job.NodePool, job.Priority = &pool, &priority
	task := job.TaskGroups[0].Tasks[0]
	task.Driver = "raw_exec"
	delete(task.Config, "themis")
	n := uint64(gpus)
	task.Resources.Devices = []*nomadapi.RequestedDevice{{Name: "themis/gpu", Count: &n}}
	kill := 10 * time.Second
	task.KillTimeout = &kill
	return job
}

// setNomadPreemption turns Nomad's batch preemption on for the test (it is
// off by default, and must stay off beside the planner in production).
func setNomadPreemption(tb testing.TB, on bool) {
	tb.Helper()
	op := env.nomad.Operator()
	cfg, _, err := op.SchedulerGetConfiguration(nil)
	if err != nil {
		tb.Fatal(err)
	}
	c := cfg.SchedulerConfig
	old := c.PreemptionConfig.BatchSchedulerEnabled
	c.PreemptionConfig.BatchSchedulerEnabled = on
	if _, _, err := op.SchedulerSetConfiguration(c, nil); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.PreemptionConfig.BatchSchedulerEnabled = old
		_, _, _ = op.SchedulerSetConfiguration(c, nil)
	})
}

// deregister purges a job and waits until none of its allocations runs and
// it holds no lease.
func deregister(tb testing.TB, id string) {
	tb.Helper()
	if _, _, err := env.nomad.Jobs().Deregister(id, true, nil); err != nil {
		tb.Fatal(err)
	}
	eventually(tb, 60*time.Second, id+" to stop", func() (bool, error) {
		as, _, err := env.nomad.Jobs().Allocations(id, true, nil)
		if err != nil {
			return false, err
		}
		busy := slices.ContainsFunc(as, func(a *nomadapi.AllocationListStub) bool {
			return a.ClientStatus == "running" || a.ClientStatus == "pending"
		})
		return !busy && jobLease(tb, id) == nil, nil
	})
}
