package driver

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
)

// TestCheckpointDirDoesNotFollowSymlinks: a component of a task's
// checkpoint dir planted as a symlink (by a job that could write the
// checkpoint root: the whole root was mounted read-write into exec and
// docker jobs) does not make the driver, as root, create, chmod or chown
// anything where it points; the task is refused, naming the symlink.
// Before: MkdirAll, Chmod and Lchown followed it: the target (standing
// in for /etc) became 0711 or 0700, and dirs the task owned appeared in it.
func TestCheckpointDirDoesNotFollowSymlinks(t *testing.T) {
	cases := []struct {
		name  string
		plant string // relative to <root>/default: the component made a symlink
	}{
		{"job dir", "symlink-job"},
		{"task dir", "symlink-job/group/ckpt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := prodEnv(t, nil, nil)
			target, err := os.MkdirTemp("", "themis-target-")
			must.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(target) })
			must.NoError(t, os.Chmod(target, 0o755))
			must.NoError(t, os.WriteFile(filepath.Join(target, "passwd"), []byte("root:x:0:0\n"), 0o644))

			link := filepath.Join(e.ckptDir, testNamespace, c.plant)
			must.NoError(t, os.MkdirAll(filepath.Dir(link), 0o711))
			must.NoError(t, os.Symlink(target, link))

			task, tc := jobTask("symlink-job", "ckpt", `echo pwned > "$THEMIS_CHECKPOINT_DIR/passwd"`)
			_, err = e.start(t, task, tc, false)
			if err == nil {
				e.wait(t, task.ID, 10*time.Second)
			}

			fi, serr := os.Stat(target)
			must.NoError(t, serr)
			must.Eq(t, os.FileMode(0o755), fi.Mode().Perm(), must.Sprintf("the driver changed the mode of %s, a symlink's target", target))
			must.Eq(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, must.Sprintf("the driver gave %s, a symlink's target, away", target))
			ents, rerr := os.ReadDir(target)
			must.NoError(t, rerr)
			must.Len(t, 1, ents, must.Sprintf("the driver made entries in %s, a symlink's target", target))
			b, rerr := os.ReadFile(filepath.Join(target, "passwd"))
			must.NoError(t, rerr)
			must.Eq(t, "root:x:0:0\n", string(b))
			must.ErrorContains(t, err, "symlink")
		})
	}
}

// TestUnsafeCheckpointRoot: a checkpoint root a user owns (say, one a job
// made under /tmp before the driver did, the old default's place) could
// be swapped under the driver by that user: the driver reports unhealthy
// naming it and refuses tasks. Before: it was used as it was.
func TestUnsafeCheckpointRoot(t *testing.T) {
	e := prodEnv(t, &fakeLeases{}, nil)
	must.NoError(t, os.Chown(e.ckptDir, 65534, 65534))
	task, tc := jobTask("root-job", "t", `exit 0`)
	_, err := e.start(t, task, tc, false)
	must.ErrorContains(t, err, "is owned by uid 65534, not root")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := e.h.Fingerprint(ctx)
	must.NoError(t, err)
	fp := <-ch
	must.Eq(t, drivers.HealthStateUnhealthy, fp.Health)
	must.StrContains(t, fp.HealthDescription, "tasks cannot start: checkpoint_root "+e.ckptDir)
}
