package nofollow

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// AnyOwner in ReadFile's owner accepts a file whoever owns it.
const AnyOwner = -1

// ReadFile reads the regular file name in d, at most max bytes: it opens
// it without following a symlink and without blocking (a FIFO's open
// returns at once), and refuses, without reading, a file that is not
// regular, is larger than max, or (owner >= 0) is not owned by owner.
// A file that grows past max while it is read is refused too.
func (d *Dir) ReadFile(name string, max int64, owner int) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(d.path, name)
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s %w", path, ErrSymlink)
		}
		return nil, &os.PathError{Op: "openat", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("%s %w (mode %s)", path, ErrNotRegular, Kind(st.Mode))
	case st.Size > max:
		return nil, fmt.Errorf("%s %w: %d bytes, the cap is %d", path, ErrTooLarge, st.Size, max)
	case owner >= 0 && int(st.Uid) != owner:
		return nil, fmt.Errorf("%s is owned by uid %d, not %d; it is not read", path, st.Uid, owner)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s %w: it grew past %d bytes while read", path, ErrTooLarge, max)
	}
	return b, nil
}

// Kind names the file type of a stat mode, for messages ("directory",
// "FIFO", "regular file", ...).
func Kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "regular file"
}

// WriteFileAtomic replaces the file name in d with data, mode perm: it
// writes a new temporary file (created exclusively, never through a
// symlink) and renames it over name, so a reader sees the old file or the
// new one, never half of one, and a symlink at name is replaced, not
// followed.
func (d *Dir) WriteFileAtomic(name string, data []byte, perm os.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	path := filepath.Join(d.path, tmp)
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return &os.PathError{Op: "openat", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	_, werr := f.Write(data)
	var cherr error
	if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
		cherr = &os.PathError{Op: "fchmod", Path: path, Err: err}
	}
	cerr := f.Close()
	if err := errors.Join(werr, cherr, cerr); err != nil {
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return err
	}
	if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return &os.PathError{Op: "renameat", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}
