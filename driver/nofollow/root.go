package nofollow

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A root is a directory the operator names (a checkpoint root) under
// which jobs get directories of their own. It is safe as long as no one
// but root can change what its path leads to: every directory from / down
// to it is root's, and none is writable by group or others unless it is
// sticky (as /tmp is: there only an entry's owner may rename or remove it,
// and the next component, root's, cannot be swapped). A path that fails
// this is refused with the component and why, rather than trusted.

// EnsureRoot opens the directory path, making it (and missing parents,
// 0755) with mode perm when it does not exist, and checks that it is a
// safe root (above). Symlinks in the part of path that exists are
// resolved first, as the operator's own (say /data -> /mnt/disk1); the
// resolved path is then walked from / without following any, so what was
// checked is what is opened. Made by the driver (root), it is root's.
func EnsureRoot(path string, perm os.FileMode) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%q is not an absolute path", path)
	}
	resolved, err := resolveExisting(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	names := strings.Split(strings.TrimPrefix(resolved, "/"), "/")
	if resolved == "/" {
		names = nil
	}
	top, err := OpenDir("/")
	if err != nil {
		return nil, err
	}
	defer top.Close()
	if err := checkSafe(top); err != nil {
		return nil, err
	}
	cur := top
	for i, n := range names {
		mode := os.FileMode(0o755)
		if i == len(names)-1 {
			mode = perm
		}
		next, created, err := cur.Sub(n, mode)
		if cur != top {
			cur.Close()
		}
		if err != nil {
			return nil, err
		}
		if created {
			if err := next.Chmod(mode); err != nil {
				next.Close()
				return nil, err
			}
		}
		if err := checkSafe(next); err != nil {
			next.Close()
			return nil, err
		}
		cur = next
	}
	if cur == top {
		return top.Walk(nil, 0, nil)
	}
	return cur, nil
}

// resolveExisting resolves the symlinks of the longest part of path that
// exists and appends the rest unchanged.
func resolveExisting(path string) (string, error) {
	rest := ""
	p := path
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// checkSafe refuses a directory that someone other than root (or the
// process's own user) owns, or that group or others may write to without
// the sticky bit.
func checkSafe(d *Dir) error {
	st, err := d.Stat()
	if err != nil {
		return err
	}
	return SafeOwner(d.path, st)
}

// SafeOwner is checkSafe on a stat already made: the directory is root's
// (or the process's own user's) and not writable by group or others
// unless sticky.
func SafeOwner(path string, st unix.Stat_t) error {
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not root: its owner could swap what the path leads to", path, st.Uid)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("%s is writable by group or others (mode %04o) without the sticky bit: anyone could swap what the path leads to", path, st.Mode&0o7777)
	}
	return nil
}
