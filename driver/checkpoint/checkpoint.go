// Package checkpoint is the themis checkpoint convention, shared by the task
// driver (which hands a resuming task its newest complete checkpoint and
// prunes old ones), workloads written in Go (examples/hello) and the planner.
// It has no Nomad dependencies.
//
// A checkpoint is a subdirectory of the task's checkpoint dir, complete once
// it holds a regular file named COMPLETE (Marker), written last; anything
// else is never handed back. Newest is by the marker's modification time,
// then by name. Save writes one atomically, List and Latest find the
// complete ones, Prune keeps the newest few. The whole convention:
// docs/checkpoints.md, "Checkpoint convention" and "Pruning".
package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Marker is the file whose presence makes a checkpoint complete.
const Marker = "COMPLETE"

// tempPrefix starts the names of checkpoints Save is still writing.
const tempPrefix = ".tmp-"

// Checkpoint is one complete checkpoint.
type Checkpoint struct {
	// Path is the checkpoint's directory.
	Path string
	// Name is its base name.
	Name string
	// Time is when it was completed: the modification time of its marker.
	Time time.Time
}

// entry is a subdirectory of a checkpoint dir, complete or not.
type entry struct {
	Checkpoint
	complete bool
	modTime  time.Time // the subdirectory's own modification time
}

// List returns the complete checkpoints in dir, newest first. A dir that
// does not exist holds none.
func List(dir string) ([]Checkpoint, error) {
	ents, err := scan(dir)
	if err != nil {
		return nil, err
	}
	var out []Checkpoint
	for _, e := range ents {
		if e.complete {
			out = append(out, e.Checkpoint)
		}
	}
	return out, nil
}

// Latest returns the newest complete checkpoint in dir; ok is false when
// there is none.
func Latest(dir string) (c Checkpoint, ok bool, err error) {
	all, err := List(dir)
	if err != nil || len(all) == 0 {
		return Checkpoint{}, false, err
	}
	return all[0], true, nil
}

// Prune removes all but the newest keep complete checkpoints of dir and the
// incomplete subdirectories older than the newest complete one. It returns
// the paths it removed. keep must be at least 1.
func Prune(dir string, keep int) ([]string, error) {
	if keep < 1 {
		return nil, fmt.Errorf("prune %s: keep must be at least 1, got %d", dir, keep)
	}
	ents, err := scan(dir)
	if err != nil {
		return nil, err
	}
	var newest time.Time
	kept := 0
	var doomed []string
	for _, e := range ents { // complete ones first, newest first
		switch {
		case e.complete && kept < keep:
			if kept == 0 {
				newest = e.Time
			}
			kept++
		case e.complete:
			doomed = append(doomed, e.Path)
		case !newest.IsZero() && e.modTime.Before(newest):
			doomed = append(doomed, e.Path)
		}
	}
	var removed []string
	var errs []error
	for _, p := range doomed {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("prune checkpoint %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// scan reads dir's subdirectories: complete checkpoints first, newest first,
// then incomplete ones.
func scan(dir string) ([]entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint dir: %w", err)
	}
	var out []entry
	for _, de := range des {
		if !de.IsDir() { // files and symlinks are not checkpoints
			continue
		}
		p := filepath.Join(dir, de.Name())
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		e := entry{Checkpoint: Checkpoint{Path: p, Name: de.Name()}, modTime: info.ModTime()}
		if m, err := os.Lstat(filepath.Join(p, Marker)); err == nil && m.Mode().IsRegular() && !strings.HasPrefix(de.Name(), ".") {
			e.complete, e.Time = true, m.ModTime()
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.complete != b.complete {
			return a.complete
		}
		if !a.complete {
			return a.Name < b.Name
		}
		if !a.Time.Equal(b.Time) {
			return a.Time.After(b.Time)
		}
		return a.Name > b.Name
	})
	return out, nil
}
