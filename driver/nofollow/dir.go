// Package nofollow does file operations as root in directories a job can
// write to, without following a path the job shaped: every path is walked
// one component at a time from a directory already open (openat with
// O_NOFOLLOW|O_DIRECTORY), so a component a job replaced by a symlink fails
// with ErrSymlink; every change is made on an open descriptor; a file is
// read only when regular, small and opened non-blocking. The themis driver
// uses it for checkpoint dirs, the progress and notice files and handing a
// dir to a task's uid, the device plugin for the per-job checkpoint dirs it
// mounts. Why not os.Root: docs/hardening.md, "No root file operation
// follows a job's path".
package nofollow

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors callers can test with errors.Is.
var (
	// ErrSymlink: a path component is a symlink.
	ErrSymlink = errors.New("is a symlink; it is not followed")
	// ErrNotDir: a path component is not a directory.
	ErrNotDir = errors.New("is not a directory")
	// ErrNotRegular: a file to read is not a regular file (a FIFO, a
	// device, a directory, a socket).
	ErrNotRegular = errors.New("is not a regular file")
	// ErrTooLarge: a file to read is larger than the cap.
	ErrTooLarge = errors.New("is larger than allowed")
	// ErrBadName: a name is empty, ".", ".." or holds a "/".
	ErrBadName = errors.New("is not a single path component")
)

// Dir is an open directory; everything below it is reached through it.
type Dir struct {
	fd   int
	path string // for messages only; never opened again
}

// Path is the directory's path as it was opened (for messages and for the
// environment of tasks; the driver never opens it again by name).
func (d *Dir) Path() string { return d.path }

// Fd is the open descriptor (valid until Close).
func (d *Dir) Fd() int { return d.fd }

// Close closes the directory.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// checkName refuses anything but one path component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%q %w", name, ErrBadName)
	}
	return nil
}

// openFlags open a directory without following a symlink.
const openFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// wrapOpen turns openat's errors for the component name of dirfd into
// ours. With O_DIRECTORY a symlink fails with ENOTDIR, not ELOOP: an
// lstat tells them apart.
func wrapOpen(dirfd int, name, path string, err error) error {
	if errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = unix.ELOOP
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%s %w", path, ErrSymlink)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s %w", path, ErrNotDir)
	}
	return &os.PathError{Op: "openat", Path: path, Err: err}
}

// OpenDir opens an absolute path, following symlinks: for paths the
// operator gave (a checkpoint root, an alloc dir Nomad made), never for one
// a job shaped.
func OpenDir(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{fd: fd, path: path}, nil
}

// Sub opens the directory name below d without following a symlink. With
// create != 0 it makes it (mode create, less the umask; Chmod after to be
// exact) when it does not exist. created reports that it did.
func (d *Dir) Sub(name string, create os.FileMode) (sub *Dir, created bool, err error) {
	if err := checkName(name); err != nil {
		return nil, false, err
	}
	path := filepath.Join(d.path, name)
	for range 2 {
		fd, err := unix.Openat(d.fd, name, openFlags, 0)
		if err == nil {
			return &Dir{fd: fd, path: path}, created, nil
		}
		if !errors.Is(err, unix.ENOENT) || create == 0 {
			return nil, false, wrapOpen(d.fd, name, path, err)
		}
		if err := unix.Mkdirat(d.fd, name, uint32(create.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, false, &os.PathError{Op: "mkdirat", Path: path, Err: err}
		} else if err == nil {
			created = true
		}
	}
	return nil, false, &os.PathError{Op: "openat", Path: path, Err: unix.ENOENT}
}

// Stat is fstat of the open directory.
func (d *Dir) Stat() (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return st, &os.PathError{Op: "fstat", Path: d.path, Err: err}
	}
	return st, nil
}

// Chmod sets the directory's mode (fchmod: the open directory itself).
func (d *Dir) Chmod(mode os.FileMode) error {
	if err := unix.Fchmod(d.fd, uint32(mode.Perm())); err != nil {
		return &os.PathError{Op: "fchmod", Path: d.path, Err: err}
	}
	return nil
}

// Chown sets the directory's owner (fchown: the open directory itself).
func (d *Dir) Chown(uid, gid int) error {
	if err := unix.Fchown(d.fd, uid, gid); err != nil {
		return &os.PathError{Op: "fchown", Path: d.path, Err: err}
	}
	return nil
}

// Lstat is fstatat of name in d, not following a symlink.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := checkName(name); err != nil {
		return st, err
	}
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &os.PathError{Op: "fstatat", Path: filepath.Join(d.path, name), Err: err}
	}
	return st, nil
}

// Names lists the directory's entries (not . and ..).
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", openFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return names, nil
}

// Remove removes the file name from d (unlinkat: a symlink itself, never
// its target); a missing file is no error.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "unlinkat", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// RemoveDir removes the empty directory name from d; a missing one is no
// error. A directory that is not empty fails with ENOTEMPTY.
func (d *Dir) RemoveDir(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "unlinkat", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// Walk opens names one below the other from d, each without following a
// symlink, making missing ones with mode create when create != 0, and
// calls check, when not nil, on each directory it passes through (not on
// the last), so that a caller can insist, say, that they are root's.
func (d *Dir) Walk(names []string, create os.FileMode, check func(path string, st unix.Stat_t) error) (*Dir, error) {
	cur := d
	for i, n := range names {
		next, _, err := cur.Sub(n, create)
		if cur != d {
			cur.Close()
		}
		if err != nil {
			return nil, err
		}
		cur = next
		if check != nil && i < len(names)-1 {
			st, err := cur.Stat()
			if err == nil {
				err = check(cur.path, st)
			}
			if err != nil {
				cur.Close()
				return nil, err
			}
		}
	}
	if cur == d { // no names: a second descriptor of d
		fd, err := unix.Openat(d.fd, ".", openFlags, 0)
		if err != nil {
			return nil, &os.PathError{Op: "openat", Path: d.path, Err: err}
		}
		return &Dir{fd: fd, path: d.path}, nil
	}
	return cur, nil
}
