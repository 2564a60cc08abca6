package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestPlantedCommandNotFollowed: a task that plants local/bin/sh, a
// symlink to a root-only file, before it exits does not make root chmod
// that file or run it when the task starts again (Nomad restarts a failed
// task in the same task dir). Before: Nomad's executor looked the command
// up in the task dir first (lookupBin: <task dir>/local/<command>, for an
// absolute command too), found the symlink, and made its target
// executable by everyone as root (makeExecutable: chmod 0755 of, say,
// /etc/shadow), then tried to run it.
func TestPlantedCommandNotFollowed(t *testing.T) {
	e := prodEnv(t, nil, nil)
	shadow := rootOnlyFile(t, "shadow", "root:$6$secret:19000::::::\n")

	task, tc := jobTask("plant-job", "plant", fmt.Sprintf(
		`if [ -L local/bin/sh ]; then echo second run; exit 0; fi; mkdir -p local/bin && ln -s %q local/bin/sh; exit 3`, shadow))
	_, err := e.start(t, task, tc, false)
	must.NoError(t, err)
	must.Eq(t, 3, e.wait(t, task.ID, 10*time.Second).ExitCode)
	must.NoError(t, e.h.DestroyTask(task.ID, true))

	// Nomad restarts the task in the same task dir.
	_, _, err = e.h.StartTask(task)
	if err == nil {
		t.Cleanup(func() { _ = e.h.DestroyTask(task.ID, true) })
		must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
	}
	fi, serr := os.Stat(shadow)
	must.NoError(t, serr)
	must.Eq(t, os.FileMode(0o600), fi.Mode().Perm(), must.Sprintf("root chmodded %s through the task's planted local/bin/sh", shadow))
	must.NoError(t, err) // and it exited 0: its script found its symlink, ran by /bin/sh
}

// TestExecutorLogNotFollowed: a task that replaces executor.out in its
// task dir with a symlink to a root-only file does not make the executor,
// as root, append its log to that file when the task starts again.
// Before: the executor opened <task dir>/executor.out following symlinks.
func TestExecutorLogNotFollowed(t *testing.T) {
	e := prodEnv(t, nil, nil)
	crontab := rootOnlyFile(t, "crontab", "# root's\n")

	task, tc := jobTask("log-job", "log", fmt.Sprintf(
		`if [ -f ran-once ]; then exit 0; fi; touch ran-once; rm -f executor.out; ln -s %q executor.out; exit 3`, crontab))
	_, err := e.start(t, task, tc, false)
	must.NoError(t, err)
	must.Eq(t, 3, e.wait(t, task.ID, 10*time.Second).ExitCode)
	must.NoError(t, e.h.DestroyTask(task.ID, true))
	_, _, err = e.h.StartTask(task)
	must.NoError(t, err)
	t.Cleanup(func() { _ = e.h.DestroyTask(task.ID, true) })
	must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
	b, err := os.ReadFile(crontab)
	must.NoError(t, err)
	must.Eq(t, "# root's\n", string(b), must.Sprintf("the executor wrote its log into %s through the task's symlink", crontab))
}

// TestCommandUnreachable: a command the task's uid cannot reach (below a
// directory others cannot search, as a checkout in a 0700 home is) fails
// the start with an error naming command, not a bare "permission denied"
// from the exec.
func TestCommandUnreachable(t *testing.T) {
	e := prodEnv(t, nil, nil)
	home, err := os.MkdirTemp("", "themis-home-") // 0700, root's
	must.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	bin := filepath.Join(home, "train.sh")
	must.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	task, tc := jobTask("home-job", "t", "")
	tc.Command, tc.Args = bin, nil
	_, err = e.start(t, task, tc, false)
	must.ErrorContains(t, err, "command: "+bin+" cannot be reached as the task's user themis-")
	must.ErrorContains(t, err, "searchable by other users")

	// A directory is reachable, but exec of it fails with a bare EACCES:
	// the start says what it is instead.
	task, tc = jobTask("home-job", "dir", "")
	tc.Command, tc.Args = os.TempDir(), nil
	_, err = e.start(t, task, tc, false)
	must.ErrorContains(t, err, "command: "+os.TempDir()+" is a directory, not a program")

	must.NoError(t, os.Chmod(home, 0o711))
	task, tc = jobTask("home-job", "t2", "")
	tc.Command, tc.Args = bin, nil
	_, err = e.start(t, task, tc, false)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, task.ID, 10*time.Second).ExitCode)
}

// rootOnlyFile writes content to a root 0600 file name in a directory of
// its own that everyone may search (the stand-in for a file under /etc a
// job must not reach), removed when the test ends.
func rootOnlyFile(t *testing.T, name, content string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "themis-"+name+"-")
	must.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	must.NoError(t, os.Chmod(dir, 0o755))
	path := filepath.Join(dir, name)
	must.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
