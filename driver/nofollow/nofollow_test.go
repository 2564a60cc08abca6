package nofollow

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
)

// tree makes a scratch dir with a target outside it that no operation may
// touch, and opens the scratch dir.
func tree(t *testing.T) (d *Dir, dir, target string) {
	t.Helper()
	base := t.TempDir()
	dir, target = filepath.Join(base, "job"), filepath.Join(base, "etc")
	must.NoError(t, os.Mkdir(dir, 0o755))
	must.NoError(t, os.Mkdir(target, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(target, "passwd"), []byte("root\n"), 0o644))
	d, err := OpenDir(dir)
	must.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d, dir, target
}

// untouched checks that target still holds only passwd, unchanged, with
// its modes.
func untouched(t *testing.T, target string) {
	t.Helper()
	fi, err := os.Stat(target)
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o755), fi.Mode().Perm())
	ents, err := os.ReadDir(target)
	must.NoError(t, err)
	must.Len(t, 1, ents)
	fi, err = os.Stat(filepath.Join(target, "passwd"))
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o644), fi.Mode().Perm())
	must.Eq(t, uint32(os.Geteuid()), fi.Sys().(*syscall.Stat_t).Uid)
	b, err := os.ReadFile(filepath.Join(target, "passwd"))
	must.NoError(t, err)
	must.Eq(t, "root\n", string(b))
}

func TestSubAndWalkDoNotFollow(t *testing.T) {
	cases := []struct {
		name    string
		plant   func(dir, target string) error
		names   []string
		wantErr error
	}{
		{"made", func(string, string) error { return nil }, []string{"a", "b", "c"}, nil},
		{"symlink first", func(dir, target string) error { return os.Symlink(target, filepath.Join(dir, "a")) }, []string{"a", "b"}, ErrSymlink},
		{"symlink last", func(dir, target string) error {
			must.NoError(t, os.MkdirAll(filepath.Join(dir, "a"), 0o755))
			return os.Symlink(target, filepath.Join(dir, "a", "b"))
		}, []string{"a", "b"}, ErrSymlink},
		{"file", func(dir, _ string) error { return os.WriteFile(filepath.Join(dir, "a"), nil, 0o644) }, []string{"a", "b"}, ErrNotDir},
		{"dot dot", func(string, string) error { return nil }, []string{"a", ".."}, ErrBadName},
		{"slash", func(string, string) error { return nil }, []string{"a/../../etc"}, ErrBadName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, dir, target := tree(t)
			must.NoError(t, c.plant(dir, target))
			sub, err := d.Walk(c.names, 0o711, nil)
			if c.wantErr != nil {
				must.True(t, errors.Is(err, c.wantErr), must.Sprintf("got %v", err))
				untouched(t, target)
				return
			}
			must.NoError(t, err)
			defer sub.Close()
			must.Eq(t, filepath.Join(append([]string{dir}, c.names...)...), sub.Path())
			must.NoError(t, sub.Chmod(0o700))
			fi, err := os.Stat(sub.Path())
			must.NoError(t, err)
			must.Eq(t, os.FileMode(0o700), fi.Mode().Perm())
		})
	}
}

func TestWalkChecksEachParent(t *testing.T) {
	d, _, _ := tree(t)
	var seen []string
	sub, err := d.Walk([]string{"a", "b", "c"}, 0o711, func(path string, _ unix.Stat_t) error {
		seen = append(seen, filepath.Base(path))
		if filepath.Base(path) == "b" {
			return errors.New("b is not root's")
		}
		return nil
	})
	must.ErrorContains(t, err, "b is not root's")
	must.Nil(t, sub)
	must.Eq(t, []string{"a", "b"}, seen)
}

func TestReadFile(t *testing.T) {
	cases := []struct {
		name    string
		plant   func(dir, target string) error
		max     int64
		owner   int
		want    string
		wantErr error
	}{
		{"regular", func(dir, _ string) error {
			return os.WriteFile(filepath.Join(dir, "f"), []byte(`{"iteration":1}`), 0o644)
		}, 64, AnyOwner, `{"iteration":1}`, nil},
		{"owner", func(dir, _ string) error { return os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644) }, 64, os.Geteuid(), "x", nil},
		{"symlink", func(dir, target string) error {
			return os.Symlink(filepath.Join(target, "passwd"), filepath.Join(dir, "f"))
		}, 64, AnyOwner, "", ErrSymlink},
		{"FIFO", func(dir, _ string) error { return unix.Mkfifo(filepath.Join(dir, "f"), 0o644) }, 64, AnyOwner, "", ErrNotRegular},
		{"directory", func(dir, _ string) error { return os.Mkdir(filepath.Join(dir, "f"), 0o755) }, 64, AnyOwner, "", ErrNotRegular},
		{"sparse 1 TiB", func(dir, _ string) error { return os.Truncate(createEmpty(filepath.Join(dir, "f")), 1<<40) }, 64 << 10, AnyOwner, "", ErrTooLarge},
		{"one byte over", func(dir, _ string) error { return os.WriteFile(filepath.Join(dir, "f"), make([]byte, 65), 0o644) }, 64, AnyOwner, "", ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, dir, target := tree(t)
			must.NoError(t, c.plant(dir, target))
			began := time.Now()
			b, err := d.ReadFile("f", c.max, c.owner)
			must.Less(t, time.Second, time.Since(began)) // a FIFO does not block
			if c.wantErr != nil {
				must.True(t, errors.Is(err, c.wantErr), must.Sprintf("got %v", err))
				must.Nil(t, b)
				untouched(t, target)
				return
			}
			must.NoError(t, err)
			must.Eq(t, c.want, string(b))
		})
	}
}

func TestReadFileOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	d, dir, _ := tree(t)
	must.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	must.NoError(t, os.Lchown(filepath.Join(dir, "f"), 65534, 65534))
	_, err := d.ReadFile("f", 64, 0)
	must.ErrorContains(t, err, "owned by uid 65534, not 0")
}

func createEmpty(p string) string {
	if f, err := os.Create(p); err == nil {
		f.Close()
	}
	return p
}

func TestWriteFileAtomicReplacesSymlink(t *testing.T) {
	d, dir, target := tree(t)
	must.NoError(t, os.Symlink(filepath.Join(target, "passwd"), filepath.Join(dir, "notice.json")))
	must.NoError(t, d.WriteFileAtomic("notice.json", []byte("{}\n"), 0o644))
	untouched(t, target)
	fi, err := os.Lstat(filepath.Join(dir, "notice.json"))
	must.NoError(t, err)
	must.True(t, fi.Mode().IsRegular())
	must.Eq(t, os.FileMode(0o644), fi.Mode().Perm())
	ents, err := os.ReadDir(dir)
	must.NoError(t, err)
	must.Len(t, 1, ents) // no temporary left
	must.NoError(t, d.Remove("notice.json"))
	must.NoError(t, d.Remove("notice.json")) // gone: no error
}

func TestChownTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	d, dir, target := tree(t)
	const old, next = 90001, 90002
	mk := func(p string, isDir bool) {
		if isDir {
			must.NoError(t, os.Mkdir(p, 0o700))
		} else {
			must.NoError(t, os.WriteFile(p, []byte("w"), 0o600))
		}
		must.NoError(t, os.Lchown(p, old, old))
	}
	mk(filepath.Join(dir, "step-1"), true)
	mk(filepath.Join(dir, "step-1", "COMPLETE"), false)
	mk(filepath.Join(dir, "step-1", "deep"), true)
	mk(filepath.Join(dir, "step-1", "deep", "w.bin"), false)
	// A symlink to the target: its own owner changes, never the target's.
	must.NoError(t, os.Symlink(target, filepath.Join(dir, "etc")))
	must.NoError(t, os.Lchown(filepath.Join(dir, "etc"), old, old))
	// A hard link in from elsewhere: left.
	must.NoError(t, os.Link(filepath.Join(target, "passwd"), filepath.Join(dir, "passwd")))
	// Root's file: not taken.
	must.NoError(t, os.WriteFile(filepath.Join(dir, "roots"), nil, 0o600))

	changed, skipped, err := ChownTree(d, next, next, func(st unix.Stat_t) bool { return st.Uid == old })
	must.NoError(t, err)
	must.Eq(t, 5, changed)
	must.Len(t, 1, skipped)
	must.StrContains(t, skipped[0], "hard links")
	owner := func(p string) uint32 {
		fi, err := os.Lstat(p)
		must.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	for _, p := range []string{"step-1", "step-1/COMPLETE", "step-1/deep", "step-1/deep/w.bin", "etc"} {
		must.Eq(t, uint32(next), owner(filepath.Join(dir, p)), must.Sprint(p))
	}
	must.Eq(t, uint32(0), owner(filepath.Join(dir, "roots")))
	must.Eq(t, uint32(0), owner(filepath.Join(dir, "passwd")))
	untouched(t, target)
}

func TestEnsureRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the ownership checks need root")
	}
	base, err := os.MkdirTemp("", "themis-root-") // under /tmp: sticky, root's
	must.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	must.NoError(t, os.Chmod(base, 0o755))

	d, err := EnsureRoot(filepath.Join(base, "var", "checkpoints"), 0o711)
	must.NoError(t, err)
	d.Close()
	fi, err := os.Stat(filepath.Join(base, "var", "checkpoints"))
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o711), fi.Mode().Perm())

	// Through the operator's own symlink: resolved, then walked.
	must.NoError(t, os.Symlink(filepath.Join(base, "var"), filepath.Join(base, "link")))
	d, err = EnsureRoot(filepath.Join(base, "link", "checkpoints"), 0o711)
	must.NoError(t, err)
	must.Eq(t, filepath.Join(base, "var", "checkpoints"), d.Path())
	d.Close()

	// A user's dir on the way: refused.
	user := filepath.Join(base, "user")
	must.NoError(t, os.Mkdir(user, 0o755))
	must.NoError(t, os.Chown(user, 65534, 65534))
	_, err = EnsureRoot(filepath.Join(user, "checkpoints"), 0o711)
	must.ErrorContains(t, err, "is owned by uid 65534, not root")
	_, err = os.Stat(filepath.Join(user, "checkpoints"))
	must.True(t, os.IsNotExist(err), must.Sprint("nothing made under a user's dir"))

	// Group-writable without the sticky bit: refused.
	open := filepath.Join(base, "open")
	must.NoError(t, os.Mkdir(open, 0o775))
	must.NoError(t, os.Chmod(open, 0o775))
	_, err = EnsureRoot(filepath.Join(open, "checkpoints"), 0o711)
	must.ErrorContains(t, err, "writable by group or others")
}
