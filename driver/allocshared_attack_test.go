package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/allocdir"
	"github.com/shoenig/test/must"
)

// TestLogDirPlantNotFollowed: a task that plants <task>.stdout.1 in its
// allocation's log dir as a symlink to a root-only file (the stand-in for
// /etc/ld.so.preload), then prints past the log's max file size, does not
// make Nomad's logmon (root, the harness runs the real one, 10 MB files)
// append its output to that file when it rotates. The task plants it in
// place, or renames the log dir away and makes one of its own. Before:
// Nomad makes <alloc>/alloc and <alloc>/alloc/logs 0777 (nobody's, not
// sticky) and logmon opens the next file with O_CREATE|O_APPEND, following
// symlinks: root wrote the task's output into the file.
func TestLogDirPlantNotFollowed(t *testing.T) {
	cases := []struct{ name, plant string }{
		{"in-place", `ln -s "$VICTIM" "$NOMAD_ALLOC_DIR/logs/$NOMAD_TASK_NAME.stdout.1"`},
		{"own-dir", `mv "$NOMAD_ALLOC_DIR/logs" "$NOMAD_ALLOC_DIR/logs.old" && mkdir "$NOMAD_ALLOC_DIR/logs" && ` +
			`ln -s "$VICTIM" "$NOMAD_ALLOC_DIR/logs/$NOMAD_TASK_NAME.stdout.1"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := prodEnv(t, nil, nil)
			victim := rootOnlyFile(t, "preload", "# root's\n")
			// 11 MB of output: past logmon's 10 MB, so it opens .stdout.1.
			task, tc := jobTask("logplant-job", "logplant", fmt.Sprintf(
				`VICTIM=%q; if %s; then echo planted >&2; else echo plant refused >&2; fi; head -c 11000000 /dev/zero | tr '\0' A; echo`, victim, c.plant))
			_, err := e.start(t, task, tc, true)
			must.NoError(t, err)
			must.Eq(t, 0, e.wait(t, task.ID, 60*time.Second).ExitCode)
			logs := filepath.Join(task.AllocDir, "alloc", "logs")
			// logmon flushes on its own time: wait for the rotated file
			// (or for the victim to change).
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				b, _ := os.ReadFile(victim)
				if string(b) != "# root's\n" {
					break
				}
				if fi, err := os.Lstat(filepath.Join(logs, "logplant.stdout.1")); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			b, err := os.ReadFile(victim)
			must.NoError(t, err)
			if string(b) != "# root's\n" {
				t.Fatalf("logmon wrote the task's output into %s through its planted symlink: %d bytes now, starting %q", victim, len(b), b[:min(len(b), 40)])
			}
			fi, err := os.Lstat(filepath.Join(logs, "logplant.stdout.1"))
			must.NoError(t, err, must.Sprint("logmon did not rotate: the test did not exercise the attack"))
			must.True(t, fi.Mode().IsRegular(), must.Sprintf("%s is %s", fi.Name(), fi.Mode()))
		})
	}
}

// TestOtherAllocCannotReachLogsOrData: a task of another allocation (its
// own dynamic uid) that knows a victim allocation's dir (its ID is in
// /proc/self/mountinfo and the executors' command lines) cannot read the
// victim's logs, alloc/data or secrets, list its log dir or task dir,
// replace or delete its log files, or plant a file among them. Before: the log files were 0644
// and alloc/logs and alloc/data 0777 under a 0755 alloc dir: the attacker
// read the victim's output and data, deleted its log and planted one.
func TestOtherAllocCannotReachLogsOrData(t *testing.T) {
	e := prodEnv(t, nil, nil)
	victim, vtc := jobTask("victim-job", "victim", `echo s3cret-output; echo s3cret-data > "$NOMAD_ALLOC_DIR/data/secret"; echo s3cret-token > "$NOMAD_SECRETS_DIR/token"; sleep 30`)
	_, err := e.start(t, victim, vtc, true)
	must.NoError(t, err)
	shared := filepath.Join(victim.AllocDir, "alloc")
	logFile := filepath.Join(shared, "logs", "victim.stdout.0")
	readEventually(t, logFile, "s3cret-output")
	readEventually(t, filepath.Join(shared, "data", "secret"), "s3cret-data")
	readEventually(t, filepath.Join(victim.TaskDir().SecretsDir, "token"), "s3cret-token")

	tries := []struct{ what, cmd string }{
		{"read the victim stdout", fmt.Sprintf(`cat %q`, logFile)},
		{"read the victim alloc/data", fmt.Sprintf(`cat %q`, filepath.Join(shared, "data", "secret"))},
		{"list the victim log dir", fmt.Sprintf(`ls %q`, filepath.Join(shared, "logs"))},
		{"plant a file in the victim log dir", fmt.Sprintf(`echo x > %q`, filepath.Join(shared, "logs", "victim.stdout.9"))},
		{"plant a file in the victim alloc/data", fmt.Sprintf(`echo x > %q`, filepath.Join(shared, "data", "planted"))},
		{"delete the victim stdout", fmt.Sprintf(`rm %q`, logFile)},
		{"list the victim task dir", fmt.Sprintf(`ls %q`, victim.TaskDir().Dir)},
		{"read the victim secrets", fmt.Sprintf(`cat %q`, filepath.Join(victim.TaskDir().SecretsDir, "token"))},
	}
	var script strings.Builder
	for _, tr := range tries {
		fmt.Fprintf(&script, "if ( %s ) >/dev/null 2>&1; then echo 'did: %s'; else echo 'denied: %s'; fi\n", tr.cmd, tr.what, tr.what)
	}
	attacker, atc := jobTask("attacker-job", "attacker", script.String())
	_, err = e.start(t, attacker, atc, true)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, attacker.ID, 20*time.Second).ExitCode)
	out := readEventually(t, filepath.Join(attacker.AllocDir, "alloc", "logs", "attacker.stdout.0"), "delete the victim stdout")
	for _, tr := range tries {
		must.StrContains(t, out, "denied: "+tr.what, must.Sprintf("attacker's output:\n%s", out))
	}
	// The victim's own task still reads its alloc/data and its logs are
	// still written (nomad alloc logs reads them as root).
	b, err := os.ReadFile(logFile)
	must.NoError(t, err)
	must.StrContains(t, string(b), "s3cret-output")
}

// TestRecoveredTaskRefencedAfterBuild: a restarted Nomad client recovers
// its tasks (RecoverTask) before its alloc runner's Build makes alloc/ and
// alloc/logs 0777 and nobody's again (Nomad 1.11.3: TaskRunner.Restore,
// then allocRunner.Run's prerun); the driver fences them again within
// seconds. Before: they stayed open until the task's next start.
func TestRecoveredTaskRefencedAfterBuild(t *testing.T) {
	old := prodEnv(t, nil, nil)
	task, tc := jobTask("refence-job", "refence", `echo ok > ready; exec sleep 60`)
	handle, err := old.start(t, task, tc, true)
	must.NoError(t, err)
	waitFile(t, filepath.Join(task.TaskDir().Dir, "ready"), 10*time.Second)
	old.d.detach(task.ID)
	fresh := prodEnv(t, nil, nil)
	must.NoError(t, fresh.h.RecoverTask(handle))
	t.Cleanup(func() { _ = fresh.h.DestroyTask(task.ID, true) })

	// The client's alloc runner builds the alloc dir again (Nomad's own
	// code, as after a client restart).
	ad := allocdir.NewAllocDir(hclog.NewNullLogger(), filepath.Dir(task.AllocDir), t.TempDir(), task.AllocID)
	must.NoError(t, ad.Build())
	shared := filepath.Join(task.AllocDir, "alloc")
	fi, err := os.Stat(shared)
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o777), fi.Mode().Perm(), must.Sprint("Build did not open alloc/: the test exercises nothing"))

	deadline := time.Now().Add(5 * time.Second)
	for {
		s, l := modeOwner(t, shared), modeOwner(t, filepath.Join(shared, "logs"))
		if s == "750 uid 0" && l == "755 uid 0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after Build: alloc/ %s, alloc/logs %s; want 750 and 755, root's", s, l)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// modeOwner is "<perm> uid <uid>" of path.
func modeOwner(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	must.NoError(t, err)
	return fmt.Sprintf("%o uid %d", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid)
}

// TestThemisTaskCannotReachOtherDriversAllocs: a themis task cannot reach
// the alloc dir of another driver's allocation on its node (an exec or
// docker job's, as Nomad builds it: alloc/ and alloc/logs 0777 and
// nobody's, its logs 0644), which the themis driver does not fence: it
// cannot read its logs, plant a symlink among them for that task's
// logmon, or list the allocations. Before: the task ran in the host's
// view of the Nomad alloc root and did all three.
func TestThemisTaskCannotReachOtherDriversAllocs(t *testing.T) {
	e := prodEnv(t, nil, nil)
	victimID := "0a1b2c3d-0000-4000-8000-00000000e8ec"
	attacker, atc := jobTask("reach-job", "reach", "")
	victimLogs := "" // set once the attacker's alloc root is known
	atc.Args = []string{"-c", `sleep 1; root=$(dirname "$NOMAD_ALLOC_DIR"); root=$(dirname "$root")
v="$root/` + victimID + `/alloc/logs"
if cat "$v/hello.stdout.0" >/dev/null 2>&1; then echo "did: read the exec job stdout"; else echo "denied: read"; fi
if ln -s /etc/shadow "$v/hello.stdout.1" 2>/dev/null; then echo "did: plant in the exec job log dir"; else echo "denied: plant"; fi
if ls "$root" 2>/dev/null | grep -q ` + victimID + `; then echo "did: list the alloc root"; else echo "denied: list"; fi
echo probed`}
	_, err := e.start(t, attacker, atc, true)
	must.NoError(t, err)
	// The exec job's allocation, built by Nomad's own code next to the
	// attacker's, while the attacker sleeps.
	ad := allocdir.NewAllocDir(hclog.NewNullLogger(), filepath.Dir(attacker.AllocDir), t.TempDir(), victimID)
	must.NoError(t, ad.Build())
	t.Cleanup(func() { _ = os.RemoveAll(ad.AllocDir) })
	victimLogs = filepath.Join(ad.AllocDir, "alloc", "logs")
	must.NoError(t, os.WriteFile(filepath.Join(victimLogs, "hello.stdout.0"), []byte("s3cret\n"), 0o644))

	must.Eq(t, 0, e.wait(t, attacker.ID, 20*time.Second).ExitCode)
	out := readEventually(t, filepath.Join(attacker.AllocDir, "alloc", "logs", "reach.stdout.0"), "probed")
	if strings.Contains(out, "did:") {
		t.Fatalf("the themis task reached another allocation's dir:\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join(victimLogs, "hello.stdout.1")); err == nil {
		t.Fatalf("a symlink was planted in the exec job's log dir")
	}
}
