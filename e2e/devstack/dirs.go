package devstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The dev stack's dirs. Its tasks run as dynamic uids (the themis
// driver's default, docs/hardening.md), so the data dir, and each Nomad
// data dir in it (Nomad makes its own 0700, and the alloc dir below it),
// must be traversable by other users; the themis driver's checkpoint root
// is root's and 0711 (the driver refuses one a user could swap); raw_exec
// themis jobs checkpoint under a root their users can write to, made here
// sticky and world-writable as /tmp is (dev only: a real cluster gives
// each namespace's raw_exec user its own dir, docs/drivers.md).

// CheckpointRoot is the themis driver's checkpoint_root in a dev stack
// (also the device plugin's, which mounts jobs' dirs below it into their
// exec and docker tasks).
func CheckpointRoot(dataDir string) string { return filepath.Join(dataDir, "checkpoints") }

// RawExecCheckpoints is the root of raw_exec themis jobs' checkpoint dirs
// in a dev stack (the planner's -checkpoint-root).
func RawExecCheckpoints(dataDir string) string { return filepath.Join(dataDir, "raw-exec-checkpoints") }

// prepareDirs makes the data dir and nomadDirs (its agents' data dirs)
// traversable, and the two checkpoint roots. The dirs above the data dir
// must be traversable too: those below the temp dir (a test's, or
// `themis dev`'s own) are made so, another is an error naming it.
func prepareDirs(dataDir string, nomadDirs ...string) error {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(abs); d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 != 0 {
			continue
		}
		if !strings.HasPrefix(d, tmp+string(filepath.Separator)) {
			return fmt.Errorf("devstack: %s (mode %s) is not traversable by other users: the stack's tasks run as dynamic uids and must reach %s; chmod o+x it, or pick another data dir", d, fi.Mode().Perm(), abs)
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
			return err
		}
	}
	for _, d := range append([]string{dataDir}, nomadDirs...) {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("devstack: make %s traversable for the tasks' users: %w", d, err)
		}
	}
	if err := os.MkdirAll(CheckpointRoot(dataDir), 0o711); err != nil {
		return err
	}
	raw := RawExecCheckpoints(dataDir)
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return err
	}
	return os.Chmod(raw, 0o1777|os.ModeSticky)
}
