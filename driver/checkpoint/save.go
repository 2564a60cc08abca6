package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Save writes a complete checkpoint named name into dir the way the
// convention asks: fill writes the checkpoint's files into a temporary
// directory, Save syncs them, writes the marker last and renames the
// directory to name. If fill fails, or the process dies on the way, no
// complete checkpoint appears; the temporary is removed, or left for Prune.
// A checkpoint of that name must not exist yet.
func Save(dir, name string, fill func(tmp string) error) (Checkpoint, error) {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsRune(name, filepath.Separator) {
		return Checkpoint{}, fmt.Errorf("checkpoint name %q: must be one path element not starting with '.'", name)
	}
	final := filepath.Join(dir, name)
	if _, err := os.Lstat(final); err == nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", final, os.ErrExist)
	}
	tmp, err := os.MkdirTemp(dir, tempPrefix+name+"-")
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := fill(tmp); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	if err := syncTree(tmp); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	if err := writeSynced(filepath.Join(tmp, Marker), []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n")); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: marker: %w", name, err)
	}
	if err := syncDir(tmp); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	done = true
	if err := syncDir(dir); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	m, err := os.Lstat(filepath.Join(final, Marker))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	return Checkpoint{Path: final, Name: name, Time: m.ModTime()}, nil
}

// writeSynced writes a new file and syncs it to disk.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	return errors.Join(werr, serr, cerr)
}

// syncTree syncs every regular file and directory under root.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		serr := f.Sync()
		cerr := f.Close()
		return errors.Join(serr, cerr)
	})
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := f.Sync()
	cerr := f.Close()
	return errors.Join(serr, cerr)
}
