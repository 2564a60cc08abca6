package nofollow

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Handing a tree over: when a job's checkpoint dir passes from the uid of
// one allocation to the uid of the next, what the old uid wrote must
// become the new one's, and nothing else may: not a file a hard link
// brought in from elsewhere, not a symlink's target, not what is mounted
// below.

// MaxDepth bounds how deep ChownTree descends (a job could nest
// directories without end); deeper entries are left and reported.
const MaxDepth = 64

// ChownTree gives every entry below d that take accepts to uid:gid, with
// fchownat(AT_SYMLINK_NOFOLLOW) relative to its open parent: a symlink's
// own owner changes, never its target's. It descends into subdirectories
// without following symlinks and without leaving d's file system, and
// leaves (reporting them in skipped) regular files with more than one
// hard link, entries below MaxDepth and entries it cannot stat. d itself
// is not changed (the caller does that with Chown). changed counts the
// entries given away.
func ChownTree(d *Dir, uid, gid int, take func(st unix.Stat_t) bool) (changed int, skipped []string, err error) {
	top, err := d.Stat()
	if err != nil {
		return 0, nil, err
	}
	var walk func(dir *Dir, depth int) error
	walk = func(dir *Dir, depth int) error {
		names, err := dir.Names()
		if err != nil {
			return err
		}
		for _, n := range names {
			path := filepath.Join(dir.path, n)
			var st unix.Stat_t
			if err := unix.Fstatat(dir.fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if !errors.Is(err, unix.ENOENT) {
					skipped = append(skipped, path)
				}
				continue
			}
			isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
			switch {
			case st.Dev != top.Dev:
				skipped = append(skipped, path+" (another file system)")
				continue
			case !isDir && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1:
				skipped = append(skipped, fmt.Sprintf("%s (%d hard links)", path, st.Nlink))
				continue
			}
			if take(st) && (int(st.Uid) != uid || int(st.Gid) != gid) {
				if err := unix.Fchownat(dir.fd, n, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					if !errors.Is(err, unix.ENOENT) {
						return fmt.Errorf("fchownat %s: %w", path, err)
					}
					continue
				}
				changed++
			}
			if !isDir {
				continue
			}
			if depth >= MaxDepth {
				skipped = append(skipped, path+" (too deep)")
				continue
			}
			sub, _, err := dir.Sub(n, 0)
			if err != nil {
				if errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotDir) || errors.Is(err, unix.ENOENT) {
					continue // swapped meanwhile: not followed
				}
				return err
			}
			err = walk(sub, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	err = walk(d, 1)
	return changed, skipped, err
}
