package driver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestTmpNotLeftToNextOwnerOfUID: what a job leaves in /tmp, /dev/shm and
// SysV shared memory is invisible to the next job that gets its dynamic
// uid (a one-uid range: the second allocation gets the first's uid). The
// first plants the cache dir a PyTorch job loads compiled code from
// (/tmp/torchinductor_<user>), a file in /dev/shm and a SysV segment.
// Before: /tmp and /dev/shm were the host's, shared by every task, and
// what a uid left there outlived its allocation: the second job found all
// three, owned by its own uid.
func TestTmpNotLeftToNextOwnerOfUID(t *testing.T) {
	const uid = "90777"
	e := prodEnv(t, nil, func(c *Config) { c.DynamicUserMin, c.DynamicUserMax = 90777, 90777 })
	t.Cleanup(func() {
		_ = os.RemoveAll("/tmp/torchinductor_themis-" + uid)
		_ = os.Remove("/dev/shm/themis-planted-" + uid)
		_ = exec.Command("sh", "-c", `ipcs -m | awk '$3 == "`+uid+`" { print $2 }' | xargs -r -n1 ipcrm -m`).Run()
	})
	first, ftc := jobTask("tmp-first", "first", `set -e; id -u
mkdir -p "/tmp/torchinductor_$USER" && echo 'import os' > "/tmp/torchinductor_$USER/planted.py"
echo planted > "/dev/shm/themis-planted-$(id -u)"
ipcmk -M 4096 >/dev/null
echo planted all`)
	_, err := e.start(t, first, ftc, true)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, first.ID, 20*time.Second).ExitCode)
	out := readEventually(t, filepath.Join(first.AllocDir, "alloc", "logs", "first.stdout.0"), "planted all")
	must.StrContains(t, out, uid, must.Sprint("the first job did not run as the one uid of the range"))
	must.NoError(t, e.h.DestroyTask(first.ID, true))

	second, stc := jobTask("tmp-second", "second", `id -u
ls "/tmp/torchinductor_$USER/planted.py" >/dev/null 2>&1 && echo "found /tmp/torchinductor"
ls "/dev/shm/themis-planted-$(id -u)" >/dev/null 2>&1 && echo "found /dev/shm"
ipcs -m | awk -v u="$USER" '$3 == u || $3 == "'$(id -u)'" { n++ } END { if (n) print "found a SysV segment" }'
echo looked`)
	_, err = e.start(t, second, stc, true)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, second.ID, 20*time.Second).ExitCode)
	out = readEventually(t, filepath.Join(second.AllocDir, "alloc", "logs", "second.stdout.0"), "looked")
	must.StrContains(t, out, uid, must.Sprint("the second job did not get the first's uid"))
	if strings.Contains(out, "found") {
		t.Fatalf("the next owner of uid %s found what the first job left:\n%s", uid, out)
	}
}

// TestPrivateTmpIsTmpfs: a task's TMPDIR (<task dir>/tmp) and /dev/shm are
// tmpfs of its own, each the size of its memory limit, and what it writes
// there is not on the host (the task dir's tmp stays empty).
func TestPrivateTmpIsTmpfs(t *testing.T) {
	e := prodEnv(t, nil, nil)
	task, tc := jobTask("tmpfs-job", "tmpfs", `set -e
for d in "$TMPDIR" /dev/shm; do echo "fs $d $(stat -f -c %T "$d")"; done
awk -v t="$TMPDIR" '$2 == t || $2 == "/dev/shm" { print "opts", $2, $4 }' /proc/self/mounts
echo hidden > "$TMPDIR/mine"; echo hidden > /dev/shm/themis-mine-$$
echo "pid $$"`)
	_, err := e.start(t, task, tc, true)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, task.ID, 20*time.Second).ExitCode)
	out := readEventually(t, filepath.Join(task.AllocDir, "alloc", "logs", "tmpfs.stdout.0"), "pid ")
	tmp := filepath.Join(task.TaskDir().Dir, "tmp")
	for _, want := range []string{
		"fs " + tmp + " tmpfs", "fs /dev/shm tmpfs",
		fmt.Sprintf("size=%dk", testMemoryMB*1024), "mode=700,uid=",
	} {
		must.StrContains(t, out, want, must.Sprintf("output:\n%s", out))
	}
	_, err = os.Stat(filepath.Join(tmp, "mine"))
	must.True(t, os.IsNotExist(err), must.Sprintf("the task's TMPDIR file is on the host: %v", err))
}
