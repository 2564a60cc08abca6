package driver

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// A running task's newest complete checkpoints are published as they
// appear, and its last one once it has exited.
func TestCheckpointsArePublished(t *testing.T) {
	bin := buildHello(t)
	leases := &fakeLeases{leases: leasedTo(testJob, "GPU-0")}
	e := newTestEnv(t, true, leases)
	e.d.checkpointReportPeriod = 50 * time.Millisecond
	task, tc := newTask(testJob, "", spec.Stanza{GPUs: 1, GracePeriod: "10s"}, "GPU-0")
	tc.Command, tc.Args = bin, []string{"-steps", "100000", "-step-time", "5ms", "-checkpoint-every", "20"}
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	log := filepath.Join(task.TaskDir().LogDir, testJob+".stdout.0")
	readEventually(t, log, "hello: step 100/")
	deadline := time.Now().Add(10 * time.Second)
	for len(leases.reported()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	must.NoError(t, e.h.StopTask(task.ID, 10*time.Second, "SIGTERM"))
	e.wait(t, task.ID, 10*time.Second)
	time.Sleep(100 * time.Millisecond) // the report after the exit
	got := leases.reported()
	must.GreaterEq(t, 2, len(got), must.Sprintf("reports: %+v", got))
	for i, r := range got {
		must.Eq(t, testJob, r.JobID)
		must.Eq(t, testNamespace, r.Namespace)
		must.Eq(t, task.AllocID, r.AllocID)
		must.True(t, strings.HasPrefix(r.Name, "step-"), must.Sprintf("name %q", r.Name))
		if i > 0 {
			must.True(t, r.Time.After(got[i-1].Time) || r.Name > got[i-1].Name, must.Sprintf("report %d not newer: %+v", i, got))
		}
	}
	out := readEventually(t, log, ", exiting")
	last := got[len(got)-1].Name
	must.StrContains(t, out, "checkpointed at step "+strings.TrimLeft(strings.TrimPrefix(last, "step-"), "0")+", exiting")
}
