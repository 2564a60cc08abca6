package driver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
)

// owner is a path's uid (not following a symlink).
func owner(t *testing.T, p string) int {
	t.Helper()
	fi, err := os.Lstat(p)
	must.NoError(t, err)
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// claimed lists the uids claimed in e's checkpoint root.
func claimed(t *testing.T, e *testEnv) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(append([]string{e.ckptDir}, uidsDir...)...))
	if os.IsNotExist(err) {
		return nil
	}
	must.NoError(t, err)
	var out []string
	for _, de := range ents {
		out = append(out, de.Name())
	}
	return out
}

// TestDynamicUIDHeldAndReleased: an allocation's tasks share its uid,
// another allocation gets another; the uid is claimed in the checkpoint
// root while held and free once its last task is destroyed, and the
// checkpoint dir then goes back to root; the job's next allocation gets
// the checkpoints its predecessor's uid wrote.
func TestDynamicUIDHeldAndReleased(t *testing.T) {
	e := prodEnv(t, nil, func(c *Config) { c.DynamicUserMin, c.DynamicUserMax = 91000, 91009 })
	const script = `id -u > "$THEMIS_CHECKPOINT_DIR/uid"; mkdir -p "$THEMIS_CHECKPOINT_DIR/step-1"; echo w > "$THEMIS_CHECKPOINT_DIR/step-1/weights"
touch "$THEMIS_CHECKPOINT_DIR/step-1/COMPLETE"; echo "$THEMIS_RESUME_FROM" > "$THEMIS_CHECKPOINT_DIR/resumed"; exec sleep 60`
	a1, tc := jobTask("held-job", "a1", script)
	a2, _ := jobTask("held-job", "a2", script)
	a2.AllocID = a1.AllocID // a second task of the same allocation
	b, _ := jobTask("other-job", "b", script)
	for _, task := range []*drivers.TaskConfig{a1, a2, b} {
		_, err := e.start(t, task, tc, false)
		must.NoError(t, err)
	}
	uid := func(task *drivers.TaskConfig) string {
		return waitFile(t, filepath.Join(e.ckptDirOf(task), "uid"), 10*time.Second)
	}
	// The script writes "resumed" last: a task destroyed before then
	// would leave no checkpoint for the next allocation to read (CI's
	// 2-core machine killed a1 after it wrote only uid and step-1).
	for _, task := range []*drivers.TaskConfig{a1, a2, b} {
		waitFile(t, filepath.Join(e.ckptDirOf(task), "resumed"), 10*time.Second)
	}
	must.Eq(t, uid(a1), uid(a2))
	must.NotEq(t, uid(a1), uid(b))
	must.SliceContainsAll(t, []string{uid(a1), uid(b)}, claimed(t, e))
	must.Eq(t, uid(a1), strconv.Itoa(owner(t, a1.TaskDir().Dir)), must.Sprint("the task dir is the task's"))

	must.NoError(t, e.h.DestroyTask(a1.ID, true))
	must.SliceContainsAll(t, []string{uid(a1), uid(b)}, claimed(t, e)) // a2 still holds it
	must.Eq(t, 0, owner(t, e.ckptDirOf(a1)), must.Sprint("a released task's checkpoint dir is root's"))
	must.NoError(t, e.h.DestroyTask(a2.ID, true))
	must.Eq(t, []string{uid(b)}, claimed(t, e))

	// The job's next allocation: a new uid may be given; the checkpoint
	// the old one wrote is handed over and handed back.
	first := uid(a1)
	next, ntc := jobTask("held-job", "a1", `cat "$THEMIS_RESUME_FROM/weights" > "$THEMIS_CHECKPOINT_DIR/read-back"; id -u > "$THEMIS_CHECKPOINT_DIR/uid2"`)
	_, err := e.start(t, next, ntc, false)
	must.NoError(t, err)
	must.Eq(t, 0, e.wait(t, next.ID, 10*time.Second).ExitCode)
	must.Eq(t, "w", waitFile(t, filepath.Join(e.ckptDirOf(next), "read-back"), time.Second))
	second := waitFile(t, filepath.Join(e.ckptDirOf(next), "uid2"), time.Second)
	must.Eq(t, second, strconv.Itoa(owner(t, filepath.Join(e.ckptDirOf(next), "step-1", "weights"))))
	t.Logf("first allocation uid %s, next %s", first, second)
}

// TestDynamicUIDSkipsBusy: a uid some process runs as, or that another
// client of the checkpoint root claimed, is not given; when none is left
// the task fails naming the range.
func TestDynamicUIDSkipsBusy(t *testing.T) {
	e := prodEnv(t, nil, func(c *Config) { c.DynamicUserMin, c.DynamicUserMax = 91100, 91102 })
	// 91100: a process runs as it (a task whose claim a crash lost).
	squatter := exec.Command("sleep", "60")
	squatter.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 91100, Gid: 91100}}
	must.NoError(t, squatter.Start())
	t.Cleanup(func() { _ = squatter.Process.Kill(); _ = squatter.Wait() })
	// 91101: claimed by another client sharing the root.
	must.NoError(t, os.MkdirAll(filepath.Join(append(append([]string{e.ckptDir}, uidsDir...), "91101")...), 0o700))

	task, tc := jobTask("busy-job", "t", `id -u > "$THEMIS_CHECKPOINT_DIR/uid"; exec sleep 60`)
	_, err := e.start(t, task, tc, false)
	must.NoError(t, err)
	must.Eq(t, "91102", waitFile(t, filepath.Join(e.ckptDirOf(task), "uid"), 10*time.Second))

	full, tc2 := jobTask("full-job", "t", `exit 0`)
	_, err = e.start(t, full, tc2, false)
	must.ErrorContains(t, err, "dynamic_user_min, dynamic_user_max: all 3 uids from 91100 to 91102 are held")
}

// TestSweepIdentities: the fingerprint releases a claim a crashed driver
// of this host left (its allocation not held, no process as its uid, a
// minute old) and gives its checkpoint dir back to root; it leaves
// another host's claims, fresh ones, and those whose uid still runs.
func TestSweepIdentities(t *testing.T) {
	e := prodEnv(t, nil, nil)
	host, err := os.Hostname()
	must.NoError(t, err)
	root, err := openCheckpointRoot(e.ckptDir)
	must.NoError(t, err)
	defer root.Close()
	uids, err := openUIDs(root)
	must.NoError(t, err)
	defer uids.Close()
	running := exec.Command("sleep", "60")
	running.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 91303, Gid: 91303}}
	must.NoError(t, running.Start())
	t.Cleanup(func() { _ = running.Process.Kill(); _ = running.Wait() })

	old := time.Now().Add(-2 * claimStale)
	plant := func(uid int, h holder, since time.Time) {
		must.NoError(t, os.MkdirAll(filepath.Join(uids.Path(), strconv.Itoa(uid)), 0o700))
		h.Since = since
		must.NoError(t, addHolder(uids, uid, h))
	}
	dir := []string{"default", "crashed", "g", "t"}
	ck, err := openCheckpointDir(root, dir)
	must.NoError(t, err)
	must.NoError(t, ck.Chown(91300, 91300))
	ck.Close()
	plant(91300, holder{Host: host, Alloc: "gone", Task: "t", Dir: dir}, old)
	plant(91301, holder{Host: "other-host", Alloc: "a", Task: "t"}, old)
	plant(91302, holder{Host: host, Alloc: "young", Task: "t"}, time.Now())
	plant(91303, holder{Host: host, Alloc: "running", Task: "t"}, old)

	gone, err := e.d.sweepIdentities(root, time.Now())
	must.NoError(t, err)
	must.Eq(t, []string{"uid 91300: alloc gone task t"}, gone)
	must.Eq(t, []string{"91301", "91302", "91303"}, claimed(t, e))
	must.Eq(t, 0, owner(t, filepath.Join(append([]string{e.ckptDir}, dir...)...)))
}
