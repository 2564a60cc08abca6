package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// BenchmarkSubmitToRunning measures the time from job registration to a
// running allocation, for a themis job (planner grant, lease, pin, driver
// lease check) and for a plain raw_exec job of the same shape (same program,
// resources and two themis GPUs, placed by Nomad alone), alternating in the
// same run. Run with -benchtime=10x for ten samples of each:
//
//	make agents && THEMIS_AGENTS_DIR=$(e2e/agents/build.sh) \
//	  go test ./e2e -run '^$' -bench SubmitToRunning -benchtime 10x
func BenchmarkSubmitToRunning(b *testing.B) {
	var themis, raw []time.Duration
	for i := 0; i < b.N; i++ {
		themis = append(themis, submitToRunning(b, themisShape(b, fmt.Sprintf("lat-themis-%d", i)), true))
		raw = append(raw, submitToRunning(b, rawShape(b, fmt.Sprintf("lat-raw-%d", i)), true))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(median(themis)), "themis-median-ms")
	b.ReportMetric(ms(median(raw)), "raw_exec-median-ms")
	b.ReportMetric(ms(slices.Max(themis)), "themis-max-ms")
	b.ReportMetric(ms(slices.Max(raw)), "raw_exec-max-ms")
	b.Logf("themis samples: %v", themis)
	b.Logf("raw_exec samples: %v", raw)
}

func themisShape(tb testing.TB, id string) *nomadapi.Job {
	return helloJob(tb, id, 100000, 2)
}

// rawShape is the same job without the planner: driver raw_exec in the
// default pool, asking Nomad for two themis GPUs itself.
func rawShape(tb testing.TB, id string) *nomadapi.Job {
	job := helloJob(tb, id, 100000, 2)
	pool := "default"
	job.NodePool = &pool
	task := job.TaskGroups[0].Tasks[0]
	task.Driver = "raw_exec"
	delete(task.Config, "themis")
	count := uint64(2)
	task.Resources.Devices = []*nomadapi.RequestedDevice{{Name: "themis/gpu", Count: &count}}
	return job
}

// submitToRunning registers a job and returns how long it took to run; with
// purge it then purges the job and waits until its GPUs are free again.
func submitToRunning(tb testing.TB, job *nomadapi.Job, purge bool) time.Duration {
	tb.Helper()
	start := time.Now()
	if _, _, err := env.nomad.Jobs().Register(job, nil); err != nil {
		tb.Fatalf("register %s: %v", *job.ID, err)
	}
	var took time.Duration
	deadline := start.Add(60 * time.Second)
	for took == 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("%s not running after 60s", *job.ID)
		}
		as, _, err := env.nomad.Jobs().Allocations(*job.ID, false, nil)
		if err != nil {
			tb.Fatal(err)
		}
		for _, a := range as {
			if a.ClientStatus == "running" {
				took = time.Since(start)
			}
			if a.ClientStatus == "failed" {
				tb.Fatalf("%s failed: %+v", *job.ID, a.TaskStates)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !purge {
		tb.Cleanup(func() { _, _, _ = env.nomad.Jobs().Deregister(*job.ID, true, nil) })
		return took
	}
	if _, _, err := env.nomad.Jobs().Deregister(*job.ID, true, nil); err != nil {
		tb.Fatal(err)
	}
	// Wait until its GPUs are free again (allocation stopped, lease gone).
	for time.Now().Before(deadline.Add(60 * time.Second)) {
		as, _, _ := env.nomad.Jobs().Allocations(*job.ID, true, nil)
		busy := false
		for _, a := range as {
			if a.ClientStatus == "running" || a.ClientStatus == "pending" {
				busy = true
			}
		}
		if !busy && jobLease(tb, *job.ID) == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return took
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
