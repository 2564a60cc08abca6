package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// Private temporary files. The host's /tmp and /dev/shm are shared by every
// task, and what a task leaves there keeps its uid, which the driver gives
// to a later allocation: a tenant could pre-create the cache dirs the next
// owner of its uid loads code from (/tmp/torchinductor_<user>, Triton's)
// or leave SysV segments behind. So a task that is not root runs, through
// the run-as shim (runas.go, still root), in a mount and an IPC namespace
// of its own where
//
//   - /dev/shm is a tmpfs of its own (mode 1777),
//   - its TMPDIR, <task dir>/tmp, is a tmpfs of its own (its uid's, 0700),
//   - SysV IPC objects are its own,
//
// each tmpfs at most the task's memory (its pages are charged to the task's
// memory cgroup in any case), all gone when the task's last process exits;
// and where the Nomad client's alloc dirs are (<data_dir>/alloc) there is
// a tmpfs of its own too, holding only its own allocation's dir (bound
// there, with its mounts): another allocation's dir, an exec or docker
// job's among them (0777 and nobody's, which the themis driver does not
// fence), cannot be reached, nor the allocations listed.
// The host's mounts propagate into the namespace (slave), none back. What a
// task still writes to the host's /tmp or /var/tmp directly (not through
// TMPDIR) is removed when its uid is released (removeLeftovers).

// tmpfsDefaultMB is each tmpfs's size for a task without a memory limit.
const tmpfsDefaultMB = 1024

// tmpfsMinMB is the least size of each tmpfs.
const tmpfsMinMB = 64

// leftoverDirs are the host's world-writable dirs whose entries a released
// uid owns are removed.
var leftoverDirs = []string{"/tmp", "/var/tmp"}

// hasPrivateTmp: who's tasks get private temporary files (a driver that is
// not root cannot make them; a root task could leave them).
func hasPrivateTmp(who taskUser) bool {
	return os.Geteuid() == 0 && !who.self && who.uid != 0
}

// privateTmp is the shim's argument for cfg's task run by who, "" for none.
func privateTmp(cfg *drivers.TaskConfig, who taskUser) string {
	if !hasPrivateTmp(who) {
		return ""
	}
	return privateTmpArg(tmpfsSizeMB(cfg), filepath.Join(cfg.TaskDir().Dir, "tmp"))
}

// tmpfsSizeMB is the size of a task's private tmpfs: its memory limit
// (memory_max where set), tmpfsDefaultMB without one.
func tmpfsSizeMB(cfg *drivers.TaskConfig) int {
	mb := tmpfsDefaultMB
	if cfg.Resources != nil && cfg.Resources.NomadResources != nil {
		m := cfg.Resources.NomadResources.Memory
		if m.MemoryMaxMB > 0 {
			mb = int(m.MemoryMaxMB)
		} else if m.MemoryMB > 0 {
			mb = int(m.MemoryMB)
		}
	}
	return max(mb, tmpfsMinMB)
}

// privateTmpArg is the shim's argument for a task with private temporary
// files: "<size MB>:<TMPDIR>".
func privateTmpArg(sizeMB int, tmpDir string) string {
	return strconv.Itoa(sizeMB) + ":" + tmpDir
}

// enterPrivateTmp is the shim's part, as root on its locked thread, before
// it drops root: the namespaces, the alloc root holding only allocDir
// ("" for none), and the two tmpfs of arg (privateTmpArg), the TMPDIR one
// for uid:gid. A TMPDIR the task replaced with a symlink is refused (it is
// opened without following one, and mounted on through the descriptor).
func enterPrivateTmp(arg, allocDir string, uid, gid int) error {
	size, dir, ok := strings.Cut(arg, ":")
	if _, err := strconv.Atoi(size); !ok || err != nil || dir == "" {
		return fmt.Errorf("private tmp %q: want <size MB>:<dir>", arg)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWIPC); err != nil {
		return fmt.Errorf("private tmp: unshare the mount and IPC namespaces: %w", err)
	}
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("private tmp: make / a slave mount: %w", err)
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV
	if fi, err := os.Lstat("/dev/shm"); err == nil && fi.IsDir() {
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", flags, "mode=1777,size="+size+"m"); err != nil {
			return fmt.Errorf("private tmp: mount a tmpfs on /dev/shm: %w", err)
		}
	}
	if allocDir != "" {
		if err := onlyOwnAlloc(allocDir); err != nil {
			return err
		}
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("private tmp: TMPDIR %s: %w", dir, err)
	}
	defer unix.Close(fd)
	opts := fmt.Sprintf("mode=0700,uid=%d,gid=%d,size=%sm", uid, gid, size)
	if err := unix.Mount("tmpfs", "/proc/self/fd/"+strconv.Itoa(fd), "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("private tmp: mount a tmpfs on TMPDIR %s: %w", dir, err)
	}
	return nil
}

// onlyOwnAlloc mounts a tmpfs on the alloc root (allocDir's parent, the
// client's <data_dir>/alloc) and binds allocDir, with the mounts below it,
// back at its own path in it: the task's view of the alloc root holds its
// own allocation only.
func onlyOwnAlloc(allocDir string) error {
	root := filepath.Dir(allocDir)
	if !filepath.IsAbs(allocDir) || root == "/" || root == "." {
		return fmt.Errorf("private alloc root: alloc dir %q has no alloc root to hide", allocDir)
	}
	fd, err := unix.Open(allocDir, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("private alloc root: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0711,size=64k"); err != nil {
		return fmt.Errorf("private alloc root: mount a tmpfs on %s: %w", root, err)
	}
	if err := unix.Mkdir(allocDir, 0o755); err != nil {
		return fmt.Errorf("private alloc root: %w", err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), allocDir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("private alloc root: bind %s back: %w", allocDir, err)
	}
	return nil
}

// removeLeftovers removes the entries of the host's /tmp and /var/tmp that
// uid owns, whole (never following a symlink), when the uid is released:
// the next allocation that gets it finds none of them.
func removeLeftovers(logger hclog.Logger, uid int) {
	for _, dir := range leftoverDirs {
		d, err := nofollow.OpenDir(dir)
		if err != nil {
			continue
		}
		names, err := d.Names()
		if err != nil {
			logger.Warn("cannot list a dir for a released uid's files", "dir", dir, "error", err)
		}
		for _, n := range names {
			st, err := d.Lstat(n)
			if err != nil || int(st.Uid) != uid {
				continue
			}
			if err := removeTree(d, n, 0); err != nil {
				logger.Warn("cannot remove a released uid's file", "dir", dir, "name", n, "uid", uid, "error", err)
				continue
			}
			logger.Info("removed a file the released uid left", "dir", dir, "name", n, "uid", uid)
		}
		d.Close()
	}
}

// maxRemoveDepth bounds removeTree's recursion.
const maxRemoveDepth = 128

// removeTree removes name from d, a directory with all it holds, walking
// with descriptors and never following a symlink.
func removeTree(d *nofollow.Dir, name string, depth int) error {
	st, err := d.Lstat(name)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return d.Remove(name)
	}
	if depth >= maxRemoveDepth {
		return fmt.Errorf("%s/%s: deeper than %d dirs", d.Path(), name, maxRemoveDepth)
	}
	sub, _, err := d.Sub(name, 0)
	if err != nil {
		return err
	}
	names, err := sub.Names()
	if err == nil {
		for _, n := range names {
			if err = removeTree(sub, n, depth+1); err != nil {
				break
			}
		}
	}
	sub.Close()
	if err != nil {
		return err
	}
	return d.RemoveDir(name)
}
