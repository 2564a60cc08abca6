package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/driver/nofollow"
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

// A running task's progress file is published with the rate the driver
// measured; the stanza's iterations stand in for a total the workload does
// not give.
func TestProgressIsPublished(t *testing.T) {
	bin := buildHello(t)
	leases := &fakeLeases{leases: leasedTo(testJob, "GPU-0")}
	e := newTestEnv(t, true, leases)
	e.d.checkpointReportPeriod = 50 * time.Millisecond
	task, tc := newTask(testJob, "", spec.Stanza{GPUs: 1, GracePeriod: "10s", Iterations: 400}, "GPU-0")
	tc.Command, tc.Args = bin, []string{"-steps", "400", "-step-time", "5ms"}
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	e.wait(t, task.ID, 20*time.Second)
	time.Sleep(100 * time.Millisecond) // the report after the exit
	got := leases.progress()
	must.GreaterEq(t, 2, len(got), must.Sprintf("reports: %+v", got))
	last := got[len(got)-1]
	must.Eq(t, int64(400), last.Iteration)
	must.Eq(t, int64(400), last.Total)
	must.Eq(t, task.AllocID, last.AllocID)
	must.NotNil(t, last.Loss)
	// 5 ms steps: about 200 iterations a second (slower on a loaded machine).
	must.Between(t, 20, last.Rate, 400)
	must.Eq(t, 0.0, last.Remaining())
}

// A workload's implausible progress reports (its count going back, or past
// the stanza's iterations) are not published, and each rule refusing them
// is a task event naming the report; the plausible ones around them are.
func TestImplausibleProgressIsRefused(t *testing.T) {
	leases := &fakeLeases{leases: leasedTo(testJob, "GPU-0")}
	e := newTestEnv(t, true, leases)
	e.d.checkpointReportPeriod = 50 * time.Millisecond
	events := stopEvents(t, e)
	task, tc := newTask(testJob, "", spec.Stanza{GPUs: 1, GracePeriod: "10s", Iterations: 1000}, "GPU-0")
	tc.Command = "/bin/sh"
	tc.Args = []string{"-c", `w() { printf '%s' "$1" > "$THEMIS_PROGRESS_FILE.tmp" && mv "$THEMIS_PROGRESS_FILE.tmp" "$THEMIS_PROGRESS_FILE"; sleep 0.4; }
w '{"iteration": 10}'; w '{"iteration": 5}'; w '{"iteration": 4}'; w '{"iteration": 5000}'; w '{"iteration": 20}'`}
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	e.wait(t, task.ID, 20*time.Second)
	time.Sleep(100 * time.Millisecond) // the report after the exit
	var its []int64
	for _, r := range leases.progress() {
		its = append(its, r.Iteration)
	}
	must.Eq(t, []int64{10, 20}, its, must.Sprint("published iterations"))
	var refused []string
	for _, ev := range events() {
		if ev.Message == eventProgressRefused {
			refused = append(refused, ev.Annotations["reason"])
		}
	}
	must.Eq(t, []string{"iteration 5 went back from 10", "iteration 5000 is past the stanza's iterations (1000)"}, refused)
}

func TestProgressMeter(t *testing.T) {
	it := func(n int64) *int64 { return &n }
	m := &progressMeter{stanzaIter: 1000}
	t0 := time.Unix(1000, 0)
	rec, changed := m.observe(progressReport{Iteration: it(100)}, t0)
	must.True(t, changed)
	must.Eq(t, 0.0, rec.Rate)
	must.Eq(t, int64(1000), rec.Total)
	must.Eq(t, -1.0, rec.Remaining())
	m.last = rec
	rec, _ = m.observe(progressReport{Iteration: it(300)}, t0.Add(10*time.Second))
	must.Eq(t, 20.0, rec.Rate)
	must.Eq(t, 35.0, rec.Remaining())
	m.last = rec
	_, changed = m.observe(progressReport{Iteration: it(300)}, t0.Add(11*time.Second))
	must.False(t, changed)
	// The workload's own total wins.
	rec, _ = m.observe(progressReport{Iteration: it(500), Total: 800}, t0.Add(12*time.Second))
	must.Eq(t, int64(800), rec.Total)
	must.Eq(t, 400.0/12, rec.Rate)
	// Implausible reports (docs/themis.md, "Whose progress counts"): a
	// count that goes back, or past the stanza's iterations, is refused,
	// naming the rule; one that stands still or goes on is taken.
	for _, c := range []struct {
		it        int64
		why, rule string
	}{
		{499, "iteration 499 went back from 500", "backwards"},
		{0, "iteration 0 went back from 500", "backwards"},
		{1001, "iteration 1001 is past the stanza's iterations (1000)", "past iterations"},
		{500, "", ""},
		{1000, "", ""},
	} {
		why, rule := m.implausible(progressReport{Iteration: it(c.it)})
		must.Eq(t, c.why, why)
		must.Eq(t, c.rule, rule)
	}
	// A resumed task: the file held iteration 500 from the last run when
	// the task started. Reports of it anchor no rate (restore and start-up
	// would dilute it); the rate runs from the first count this run wrote.
	resumed := &progressMeter{stanzaIter: 1000, carried: 500, hasCarried: true}
	rec, _ = resumed.observe(progressReport{Iteration: it(500)}, t0)
	must.Eq(t, 0.0, rec.Rate)
	rec, _ = resumed.observe(progressReport{Iteration: it(500)}, t0.Add(60*time.Second))
	must.Eq(t, 0.0, rec.Rate)
	rec, _ = resumed.observe(progressReport{Iteration: it(510)}, t0.Add(70*time.Second))
	must.Eq(t, 0.0, rec.Rate)
	rec, _ = resumed.observe(progressReport{Iteration: it(580)}, t0.Add(80*time.Second))
	must.Eq(t, 7.0, rec.Rate, must.Sprint("measured within this run: 70 iterations in 10 s, not 80 in 80 s"))

	unbounded := &progressMeter{}
	_, rule := unbounded.implausible(progressReport{Iteration: it(1 << 40)})
	must.Eq(t, "", rule, must.Sprint("no stanza iterations: no bound"))

	dir := t.TempDir()
	path := filepath.Join(dir, ProgressFileName)
	d, err := nofollow.OpenDir(dir)
	must.NoError(t, err)
	defer d.Close()
	_, ok, err := readProgress(d, nofollow.AnyOwner)
	must.NoError(t, err)
	must.False(t, ok)
	for _, bad := range []string{`{"total": 5}`, `{"iteration": -1}`, `not json`} {
		must.NoError(t, os.WriteFile(path, []byte(bad), 0o644))
		_, _, err = readProgress(d, nofollow.AnyOwner)
		must.Error(t, err, must.Sprint(bad))
	}
	must.NoError(t, os.WriteFile(path, []byte(`{"iteration": 3}`), 0o644))
	r, ok, err := readProgress(d, os.Geteuid())
	must.NoError(t, err)
	must.True(t, ok)
	must.Eq(t, int64(3), *r.Iteration)
	_, _, err = readProgress(d, os.Geteuid()+1)
	must.ErrorContains(t, err, "not read")
}
