package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestJobsCannotReachEachOther: two jobs on one node, with the plugin's
// defaults, run as two identities: one cannot signal the other's
// processes, read their environment, read its checkpoint dir or plant a
// file in its task dir (which the executor or resolveCommand would run on
// the victim's next start). Before: every job ran as nobody, and all four
// succeeded.
func TestJobsCannotReachEachOther(t *testing.T) {
	e := prodEnv(t, nil, nil)
	victim, vtc := jobTask("victim-job", "victim",
		`echo s3cret > "$THEMIS_CHECKPOINT_DIR/secret"; id -u > "$THEMIS_CHECKPOINT_DIR/uid"; exec sleep 60`)
	victim.Env["VICTIM_TOKEN"] = "tok-4242"
	_, err := e.start(t, victim, vtc, false)
	must.NoError(t, err)
	victimUID := waitFile(t, filepath.Join(e.ckptDirOf(victim), "uid"), 10*time.Second)
	st, err := e.h.InspectTask(victim.ID)
	must.NoError(t, err)
	pid := st.DriverAttributes["pid"]

	script := fmt.Sprintf(`p=%s; d=%q; vt=%q
id -u > "$THEMIS_CHECKPOINT_DIR/uid"
kill -0 $p 2>/dev/null && echo signal=yes || echo signal=no
grep -q tok-4242 /proc/$p/environ 2>/dev/null && echo environ=yes || echo environ=no
grep -q s3cret "$d/secret" 2>/dev/null && echo checkpoint=yes || echo checkpoint=no
(echo planted > "$vt/planted") 2>/dev/null && echo taskdir=yes || echo taskdir=no
exit 0`, pid, e.ckptDirOf(victim), victim.TaskDir().Dir)
	attacker, atc := jobTask("attacker-job", "attacker", script)
	_, err = e.start(t, attacker, atc, true)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, attacker.ID, 10*time.Second).ExitCode)
	out := readEventually(t, filepath.Join(attacker.TaskDir().LogDir, "attacker.stdout.0"), "taskdir=")
	attackerUID := waitFile(t, filepath.Join(e.ckptDirOf(attacker), "uid"), time.Second)

	var reached []string
	for _, what := range []string{"signal", "environ", "checkpoint", "taskdir"} {
		if !strings.Contains(out, what+"=no") {
			reached = append(reached, what)
		}
	}
	must.SliceEmpty(t, reached, must.Sprintf("job %s (uid %s) reached job %s (uid %s): %s",
		attacker.JobID, attackerUID, victim.JobID, victimUID, strings.Join(strings.Fields(out), " ")))
	must.NotEq(t, "0", victimUID)
	must.NotEq(t, victimUID, attackerUID, must.Sprint("two jobs ran as one user"))
}

// TestNoGroupZero: a task has no supplementary groups the operator did
// not configure; above all not root's group 0. Before: Nomad's executor
// (drivers/shared/executor/executor_unix.go, setCmdUser: a slice made with
// its length, then appended to) gave every task group 0 next to its own.
func TestNoGroupZero(t *testing.T) {
	e := prodEnv(t, nil, nil)
	task, tc := jobTask("groups-job", "groups", `id -G > "$THEMIS_CHECKPOINT_DIR/groups"; id -g > "$THEMIS_CHECKPOINT_DIR/gid"`)
	_, err := e.start(t, task, tc, false)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
	groups := strings.Fields(waitFile(t, filepath.Join(e.ckptDirOf(task), "groups"), time.Second))
	gid := waitFile(t, filepath.Join(e.ckptDirOf(task), "gid"), time.Second)
	must.Eq(t, []string{gid}, groups, must.Sprint("the task's groups are its own group only"))
	for _, g := range groups {
		n, err := strconv.Atoi(g)
		must.NoError(t, err)
		must.NotEq(t, 0, n, must.Sprintf("the task is in group 0: id -G = %v", groups))
	}
}

// TestTaskUserNotInAllowList: a task cannot pick the user it runs as;
// with the plugin's defaults a `user` is refused, naming the field. Before:
// any user but root ran (user = "daemon" ran as uid 1).
func TestTaskUserNotInAllowList(t *testing.T) {
	e := prodEnv(t, nil, nil)
	task, tc := jobTask("user-job", "user", `id -u > "$THEMIS_CHECKPOINT_DIR/uid"`)
	task.User = "daemon"
	_, err := e.start(t, task, tc, false)
	if err == nil {
		e.wait(t, task.ID, 10*time.Second)
		b, _ := os.ReadFile(filepath.Join(e.ckptDirOf(task), "uid"))
		t.Fatalf("a task that named user = %q started and ran as uid %s", task.User, strings.TrimSpace(string(b)))
	}
	must.ErrorContains(t, err, `user: "daemon"`)
}
