package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// An allocation's shared dir. Nomad makes <alloc dir>/alloc and its logs,
// data and tmp dirs 0777 and nobody's (client/allocdir, Build and
// dropDirPermissions), below the alloc dir, root's 0755. Two things follow
// for a themis task:
//
//   - Nomad's logmon, root, opens the next <task>.stdout.N when it rotates
//     with O_CREATE|O_APPEND, following symlinks (client/logmon/logging,
//     rotator.go): a task that plants <task>.stdout.1 -> /etc/ld.so.preload
//     in the log dir (or renames the log dir away and makes its own) and
//     prints past max_file_size has root append its output to that file.
//     fs.protected_symlinks does not help: the dir is not sticky.
//   - Every other job's task that knows the allocation's ID (in
//     /proc/self/mountinfo, and the executors' command lines) reads its
//     logs (0644) and alloc/data, and plants or deletes files there.
//
// fenceShared therefore makes the shared dir root's, its group the task's
// (0750: the allocation's uid enters and reads it, no one else), and the
// log dir root's 0755 (the task reads its own logs, as `nomad alloc logs`
// does as root; nothing in it is the task's to replace), and removes what
// is in the log dir that is not root's, or is a symlink (nothing but
// logmon's files and FIFOs, root's, belongs there). It runs at every
// start, and after a recovery once a second for refenceWindow: a
// restarted client recovers its tasks before its alloc runner's Build
// makes the dirs 0777 and nobody's again (Nomad 1.11.3: TaskRunner.Restore
// calls RecoverTask; allocRunner.Run's prerun then calls Build), so the
// dirs are open for at most a second, and what was planted in the log dir
// meanwhile is removed. A root task's dirs, and a driver's that is not
// root, stay as Nomad made them.

// refenceWindow is how long after a recovery the driver fences the dirs
// again, once a second.
const refenceWindow = 2 * time.Minute

// Modes of the fenced shared dir and log dir.
const (
	sharedDirMode = 0o750
	logDirMode    = 0o755
)

// fenceShared fences cfg's allocation's shared dir and log dir for who.
func fenceShared(logger hclog.Logger, cfg *drivers.TaskConfig, who taskUser) error {
	if os.Geteuid() != 0 || who.self || who.uid == 0 || cfg.AllocDir == "" {
		return nil
	}
	alloc, err := nofollow.OpenDir(cfg.AllocDir)
	if err != nil {
		return fmt.Errorf("alloc dir: %w", err)
	}
	defer alloc.Close()
	if st, err := alloc.Stat(); err != nil {
		return fmt.Errorf("alloc dir: %w", err)
	} else if st.Uid != 0 || st.Mode&0o022 != 0 {
		return fmt.Errorf("alloc dir %s: owned by uid %d, mode %o: want root's, writable by root only (Nomad makes it so)", alloc.Path(), st.Uid, st.Mode&0o7777)
	}
	shared, _, err := alloc.Sub("alloc", 0)
	if err != nil {
		return fmt.Errorf("alloc dir: %w", err)
	}
	defer shared.Close()
	if err := fenceDir(shared, 0, who.gid, sharedDirMode); err != nil {
		return err
	}
	logs, _, err := shared.Sub("logs", 0)
	if err != nil {
		return fmt.Errorf("log dir: %w", err)
	}
	defer logs.Close()
	if err := fenceDir(logs, 0, 0, logDirMode); err != nil {
		return err
	}
	return removePlanted(logger, logs)
}

// refenceAfterRecovery fences cfg's dirs for who once a second for
// refenceWindow, or until done is closed (the task exited).
func refenceAfterRecovery(logger hclog.Logger, cfg *drivers.TaskConfig, who taskUser, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.After(refenceWindow)
	for {
		select {
		case <-done:
			return
		case <-end:
			return
		case <-tick.C:
			if err := fenceShared(logger, cfg, who); err != nil {
				logger.Warn("cannot fence the recovered task's alloc/ and log dir again", "error", err)
			}
		}
	}
}

// fenceDir gives d to uid:gid with mode, on its descriptor.
func fenceDir(d *nofollow.Dir, uid, gid int, mode os.FileMode) error {
	if err := d.Chown(uid, gid); err != nil {
		return fmt.Errorf("fence %s: %w", d.Path(), err)
	}
	if err := d.Chmod(mode); err != nil {
		return fmt.Errorf("fence %s: %w", d.Path(), err)
	}
	return nil
}

// removePlanted removes the entries of the log dir that are symlinks or not
// root's: planted there before the dir was fenced.
func removePlanted(logger hclog.Logger, logs *nofollow.Dir) error {
	names, err := logs.Names()
	if err != nil {
		return fmt.Errorf("log dir %s: %w", logs.Path(), err)
	}
	for _, n := range names {
		st, err := logs.Lstat(n)
		if err != nil {
			return fmt.Errorf("log dir: %w", err)
		}
		if st.Uid == 0 && st.Mode&unix.S_IFMT != unix.S_IFLNK {
			continue
		}
		rm := logs.Remove
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			rm = logs.RemoveDir
		}
		if err := rm(n); err != nil {
			return fmt.Errorf("log dir: remove %s (%s of uid %d, not logmon's): %w", filepath.Join(logs.Path(), n), nofollow.Kind(st.Mode), st.Uid, err)
		}
		logger.Warn("removed an entry of the log dir that logmon did not make", "path", filepath.Join(logs.Path(), n), "kind", nofollow.Kind(st.Mode), "uid", st.Uid)
	}
	return nil
}
