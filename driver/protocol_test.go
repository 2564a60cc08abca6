package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/client/taskenv"
	"github.com/hashicorp/nomad/nomad/mock"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/driver/checkpoint"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/spec"
)

// taskCheckpointDir is where the driver keeps the checkpoints of a test task.
func (e *testEnv) taskCheckpointDir(task string) string {
	return filepath.Join(e.ckptDir, testNamespace, testJob, "group", task)
}

// setKeep reconfigures how many checkpoints the driver keeps.
func (e *testEnv) setKeep(t *testing.T, keep int) {
	t.Helper()
	cfg, _ := e.d.current()
	cfg.KeepCheckpoints = keep
	var data []byte
	must.NoError(t, base.MsgPackEncode(&data, &cfg))
	must.NoError(t, e.h.SetConfig(&base.Config{PluginConfig: data}))
}

// mkCheckpoint makes a checkpoint subdirectory completed (or, without the
// marker, last touched) at base + at seconds.
func mkCheckpoint(t *testing.T, dir, name string, complete bool, at int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	must.NoError(t, os.MkdirAll(p, 0o700))
	when := time.Now().Add(-time.Hour).Add(time.Duration(at) * time.Second)
	if complete {
		m := filepath.Join(p, checkpoint.Marker)
		must.NoError(t, os.WriteFile(m, nil, 0o600))
		must.NoError(t, os.Chtimes(m, when, when))
	}
	must.NoError(t, os.Chtimes(p, when, when))
	return p
}

func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	must.NoError(t, err)
	var out []string
	for _, d := range des {
		if d.IsDir() {
			out = append(out, d.Name())
		}
	}
	slices.Sort(out)
	return out
}

// TestStartTask_CheckpointEnv: THEMIS_RESUME_FROM names the newest complete
// checkpoint (never an incomplete one), THEMIS_RESTART_COUNT comes from the
// job meta Nomad passes, a stale notice file is gone, old checkpoints are
// pruned before the task starts.
func TestStartTask_CheckpointEnv(t *testing.T) {
	type ck struct {
		name     string
		complete bool
		at       int
	}
	cases := []struct {
		name     string
		ckpts    []ck
		meta     map[string]string
		keep     int
		resume   string // checkpoint name, "" for none
		restarts string
		left     []string
	}{
		{"first start", nil, nil, 3, "", "0", nil},
		{"newest complete", []ck{{"a", true, 1}, {"b", true, 3}, {"c", true, 2}}, map[string]string{"NOMAD_META_themis.restart_count": "2"}, 3,
			"b", "2", []string{"a", "b", "c"}},
		{"incomplete newer is skipped", []ck{{"step-1", true, 1}, {"step-2", false, 9}}, map[string]string{"NOMAD_META_THEMIS.RESTART_COUNT": "4"}, 3,
			"step-1", "4", []string{"step-1", "step-2"}},
		{"only incomplete", []ck{{"cut", false, 1}}, nil, 3, "", "0", []string{"cut"}},
		{"pruned to keep", []ck{{"a", true, 1}, {"b", true, 2}, {"c", true, 3}, {"d", true, 4}, {"old-cut", false, 0}}, nil, 2,
			"d", "0", []string{"c", "d"}},
		{"bad restart count is 0", nil, map[string]string{"NOMAD_META_themis.restart_count": "many"}, 3, "", "0", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, false, nil)
			e.setKeep(t, c.keep)
			dir := e.taskCheckpointDir("env")
			must.NoError(t, os.MkdirAll(dir, 0o700))
			for _, k := range c.ckpts {
				mkCheckpoint(t, dir, k.name, k.complete, k.at)
			}
			stale := filepath.Join(dir, NoticeFileName)
			must.NoError(t, os.WriteFile(stale, []byte(`{"reason":"stale"}`), 0o644))

			task, tc := newTask("env", `[ -e "$THEMIS_NOTICE_FILE" ] && n=stale || n=none
printf '%s|%s|%s|%s\n' "$THEMIS_RESUME_FROM" "$THEMIS_RESTART_COUNT" "$THEMIS_NOTICE_FILE" "$n" > env.out`, spec.Stanza{GPUs: 1})
			for k, v := range c.meta {
				task.Env[k] = v
			}
			_, err := e.start(t, task, tc, false)
			must.NoError(t, err)
			must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
			b, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, "env.out"))
			must.NoError(t, err)
			resume := ""
			if c.resume != "" {
				resume = filepath.Join(dir, c.resume)
			}
			must.Eq(t, strings.Join([]string{resume, c.restarts, stale, "none"}, "|")+"\n", string(b))
			must.Eq(t, c.left, subdirs(t, dir))
		})
	}
}

// Nomad turns the job meta key the planner sets into the env names the
// driver reads: its env cleaning keeps the dot.
func TestRestartCount_FromNomadTaskEnv(t *testing.T) {
	alloc := mock.Alloc()
	alloc.Job.Meta = map[string]string{spec.MetaRestartCount: "3"}
	task := alloc.Job.TaskGroups[0].Tasks[0]
	env := taskenv.NewBuilder(mock.Node(), alloc, task, "global").Build().Map()
	n, err := restartCount(env)
	must.NoError(t, err)
	must.Eq(t, 3, n)
	must.Eq(t, "3", env["NOMAD_META_themis.restart_count"])

	n, err = restartCount(map[string]string{})
	must.NoError(t, err)
	must.Eq(t, 0, n)
	_, err = restartCount(map[string]string{"NOMAD_META_themis.restart_count": "-1"})
	must.ErrorContains(t, err, spec.MetaRestartCount)
}

// stopEvents collects the driver's task events until the test ends.
func stopEvents(t *testing.T, e *testEnv) func() []*drivers.TaskEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := e.h.TaskEvents(ctx)
	must.NoError(t, err)
	got := make(chan *drivers.TaskEvent, 64)
	go func() {
		for ev := range ch {
			got <- ev
		}
	}()
	return func() []*drivers.TaskEvent {
		var out []*drivers.TaskEvent
		deadline := time.After(3 * time.Second)
		for {
			select {
			case ev := <-got:
				out = append(out, ev)
			case <-deadline:
				return out
			}
		}
	}
}

func findEvent(evs []*drivers.TaskEvent, msg string) *drivers.TaskEvent {
	for _, ev := range evs {
		if ev.Message == msg {
			return ev
		}
	}
	return nil
}

// TestStopTask_Protocol: the notice file (reason from the job lease's revoke,
// deadline), the checkpoint signal to the whole process group, SIGKILL of
// the group at the deadline, and the grace cut by a shorter Nomad timeout.
func TestStopTask_Protocol(t *testing.T) {
	revoking := &fakeLeases{jobs: map[string]*lease.JobLease{
		lease.JobKey(testNamespace, testJob): {JobID: testJob, Namespace: testNamespace,
			Revoke: &lease.Revoke{Reason: "preempted for default/te-1 by fitgpp"}},
	}}
	// The leader and a child both ignore the signal; the child's pid is
	// recorded so that the test can see it die with the group.
	const ignores = `trap '' TERM; sleep 300 & echo $! > child.pid; echo ready; while :; do sleep 0.05; done`
	// Polls the notice file instead of trapping the signal, copies it, exits.
	const polls = `trap '' TERM; echo ready; while [ ! -s "$THEMIS_NOTICE_FILE" ]; do sleep 0.05; done
cp "$THEMIS_NOTICE_FILE" notice.copy; exit 0`
	cases := []struct {
		name    string
		leases  LeaseReader
		script  string
		grace   string
		timeout time.Duration
		wait    time.Duration // what the driver waits: min(grace, timeout)
		killed  bool
		cut     bool
		reason  string
	}{
		{"polls the notice, revoke reason", revoking, polls, "20s", 30 * time.Second, 20 * time.Second, false, false,
			"preempted for default/te-1 by fitgpp"},
		{"no lease: Nomad's reason", &fakeLeases{}, polls, "20s", 30 * time.Second, 20 * time.Second, false, false, DefaultStopReason},
		{"lease unreadable: Nomad's reason", &fakeLeases{jobErr: errors.New("connection refused")}, polls, "20s", 30 * time.Second,
			20 * time.Second, false, false, DefaultStopReason},
		{"ignores the signal: group killed at the grace", revoking, ignores, "1s", 30 * time.Second, time.Second, true, false,
			"preempted for default/te-1 by fitgpp"},
		{"grace cut by Nomad's timeout", nil, ignores, "1m", 1500 * time.Millisecond, 1500 * time.Millisecond, true, true, DefaultStopReason},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, false, c.leases)
			events := stopEvents(t, e)
			task, tc := newTask("proto", c.script, spec.Stanza{GPUs: 1, GracePeriod: c.grace})
			_, err := e.start(t, task, tc, true)
			must.NoError(t, err)
			readEventually(t, filepath.Join(task.TaskDir().LogDir, "proto.stdout.0"), "ready")

			began := time.Now()
			must.NoError(t, e.h.StopTask(task.ID, c.timeout, "SIGINT"))
			took := time.Since(began)
			res := e.wait(t, task.ID, 5*time.Second)

			n, err := ReadNotice(filepath.Join(e.taskCheckpointDir("proto"), NoticeFileName))
			must.NoError(t, err)
			must.Eq(t, c.reason, n.Reason)
			must.Eq(t, "SIGTERM", n.Signal)
			// The deadline is StopTask's start plus the wait, to the second.
			lo, hi := began.Add(c.wait-2*time.Second), began.Add(c.wait+time.Second)
			must.True(t, n.Deadline.After(lo) && n.Deadline.Before(hi),
				must.Sprintf("deadline %v, want between %v and %v", n.Deadline, lo, hi))

			evs := events()
			must.NotNil(t, findEvent(evs, eventCheckpointAsk))
			if c.killed {
				must.Eq(t, int(syscall.SIGKILL), res.Signal)
				must.Greater(t, c.wait-100*time.Millisecond, took) // not before the deadline
				must.Less(t, c.wait+10*time.Second, took)
				must.NotNil(t, findEvent(evs, eventKilledAtExpiry))
				childGone(t, task)
			} else {
				must.Eq(t, 0, res.ExitCode)
				must.Less(t, c.wait/2, took)
				b, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, "notice.copy"))
				must.NoError(t, err)
				must.StrContains(t, string(b), `"reason":"`+c.reason+`"`)
				must.StrContains(t, string(b), `"deadline":"`+n.Deadline.Format(time.RFC3339)+`"`)
			}
			cut := findEvent(evs, eventGraceCut)
			must.Eq(t, c.cut, cut != nil)
			if c.cut {
				must.Eq(t, "1m0s", cut.Annotations["grace_period"])
				must.Eq(t, "58.5s", cut.Annotations["cut_by"])
			}
		})
	}
}

// childGone waits for the task's recorded child process to be gone.
func childGone(t *testing.T, task *drivers.TaskConfig) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, "child.pid"))
	must.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must.NoError(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := readProcStat(pid)
		if err != nil || st.State == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task's child %d survived the kill of its process group", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// After the task exits the driver prunes what it wrote down to
// keep_checkpoints, newest kept.
func TestTaskExit_Prunes(t *testing.T) {
	e := newTestEnv(t, false, nil)
	e.setKeep(t, 2)
	task, tc := newTask("prune", `for i in 1 2 3 4; do mkdir "$THEMIS_CHECKPOINT_DIR/step-$i" && touch "$THEMIS_CHECKPOINT_DIR/step-$i/COMPLETE"; done`,
		spec.Stanza{GPUs: 1})
	_, err := e.start(t, task, tc, false)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
	dir := e.taskCheckpointDir("prune")
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(subdirs(t, dir), []string{"step-3", "step-4"}) {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint dir holds %v after exit, want step-3 and step-4", subdirs(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSetConfig_KeepCheckpoints(t *testing.T) {
	e := newTestEnv(t, false, nil)
	cfg, _ := e.d.current()
	must.Eq(t, DefaultKeepCheckpoints, cfg.KeepCheckpoints)
	cfg.KeepCheckpoints = -1
	var data []byte
	must.NoError(t, base.MsgPackEncode(&data, &cfg))
	must.ErrorContains(t, e.h.SetConfig(&base.Config{PluginConfig: data}), "keep_checkpoints: must be at least 1, got -1")
}

func TestProtocolWait(t *testing.T) {
	p := protocol{grace: 30 * time.Second}
	cases := []struct {
		timeout time.Duration
		wait    time.Duration
		cut     bool
	}{
		{time.Minute, 30 * time.Second, false},
		{30 * time.Second, 30 * time.Second, false},
		{5 * time.Second, 5 * time.Second, true},
		{-time.Second, 0, true},
	}
	for _, c := range cases {
		w, cut := p.wait(c.timeout)
		must.Eq(t, c.wait, w)
		must.Eq(t, c.cut, cut)
	}
}
