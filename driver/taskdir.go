package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// A task's dir. Nomad makes <alloc dir>/<task> and its local, tmp and
// secrets dirs 0777, root's, so that a task of any user can write them;
// and so could every other job's task that knows the alloc ID (it is in
// every executor's command line), planting, say, local/<command> for the
// task's next start. The driver gives the task dir to the task's uid,
// 0700, on the open descriptor (the alloc dir above it is Nomad's, root's
// 0755, so the entry is not a job's to swap), and, when the dir passes to
// a new uid (a restarted task whose allocation's uid was taken meanwhile),
// what earlier dynamic uids wrote in it (nofollow.ChownTree: not the
// secrets tmpfs, not a symlink's target). A root task's dir, and the dir
// of a driver that is not root, stay as Nomad made them.

// giveTaskDir hands the task dir to who.
func giveTaskDir(logger hclog.Logger, cfg *drivers.TaskConfig, who taskUser, lo, hi int) error {
	if os.Geteuid() != 0 || who.self || who.uid == 0 || cfg.AllocDir == "" {
		return nil
	}
	alloc, err := nofollow.OpenDir(cfg.AllocDir)
	if err != nil {
		return fmt.Errorf("task dir: %w", err)
	}
	defer alloc.Close()
	d, _, err := alloc.Sub(filepath.Base(cfg.TaskDir().Dir), 0)
	if err != nil {
		return fmt.Errorf("task dir: %w", err)
	}
	defer d.Close()
	changed, skipped, err := nofollow.ChownTree(d, who.uid, who.gid, func(st unix.Stat_t) bool {
		u := int(st.Uid)
		return u != who.uid && u >= lo && u <= hi
	})
	if err != nil {
		return fmt.Errorf("task dir %s: give it to uid %d: %w", d.Path(), who.uid, err)
	}
	if changed > 0 {
		logger.Info("handed the task dir over to the task's uid", "dir", d.Path(), "uid", who.uid, "entries", changed, "left", skipped)
	}
	if err := d.Chown(who.uid, who.gid); err != nil {
		return fmt.Errorf("task dir: %w", err)
	}
	return d.Chmod(0o700)
}

// taskDirOwner is the owner of a task dir (a restarted task's allocation
// asks for that uid again first), or -1.
func taskDirOwner(dir string) int {
	fi, err := os.Lstat(dir)
	if err != nil {
		return -1
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
