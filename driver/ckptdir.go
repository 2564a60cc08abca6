package driver

import (
	"fmt"
	"net/url"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// A task's checkpoint dir, <checkpoint_root>/<namespace>/<job>/<group>/<task>,
// outlives its allocation, so a replacement of the job on this node (or,
// on shared storage, on another) finds its checkpoints. The driver makes
// and hands it over as root, so it never follows a path a job could have
// shaped (nofollow): the root must be root's and safe (nofollow.EnsureRoot);
// the dirs between it and the task's are root's, 0711 (a task reaches its
// own dir without listing the others) and checked to be so; the task's own
// dir is opened without following a symlink, and only then given to the
// task's uid, 0700, with fchown and fchmod on the open descriptor.
//
// When the dir passes to a new uid (a new allocation's), what earlier
// uids of the dynamic range wrote in it (and what its previous owner
// wrote, when that was a user) becomes the new uid's, walked with
// nofollow.ChownTree (no symlink's target, no hard link from elsewhere, no
// other file system). When the allocation releases its uid, the dir goes
// back to root, 0700, so whoever holds the uid next cannot enter it.

// checkpointNames are the escaped names of a task's checkpoint dir below
// the root.
func checkpointNames(cfg *drivers.TaskConfig) ([]string, error) {
	var out []string
	for _, p := range []struct{ what, v string }{
		{"namespace", cfg.Namespace}, {"job id", cfg.JobID}, {"task group", cfg.TaskGroupName}, {"task name", cfg.Name},
	} {
		v := url.PathEscape(p.v)
		if v == "" || v == "." || v == ".." {
			return nil, fmt.Errorf("checkpoint dir: %s %q cannot be a directory name", p.what, p.v)
		}
		out = append(out, v)
	}
	return out, nil
}

// openCheckpointRoot opens checkpoint_root, making it root's and 0711
// when it does not exist, and refuses one that is not safe.
func openCheckpointRoot(path string) (*nofollow.Dir, error) {
	d, err := nofollow.EnsureRoot(path, checkpointParentPerms)
	if err != nil {
		return nil, fmt.Errorf("checkpoint_root %s: %w", path, err)
	}
	return d, nil
}

// openCheckpointDir opens the task's checkpoint dir below root, making
// what is missing: the dirs above it root's and 0711, checked; the dir
// itself as it is (the caller hands it over).
func openCheckpointDir(root *nofollow.Dir, names []string) (*nofollow.Dir, error) {
	cur := root
	for i, n := range names {
		perm := os.FileMode(checkpointParentPerms)
		if i == len(names)-1 {
			perm = checkpointDirPerms
		}
		next, created, err := cur.Sub(n, perm)
		if cur != root {
			cur.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint dir: %w", err)
		}
		cur = next
		if i == len(names)-1 {
			if created {
				err = next.Chmod(checkpointDirPerms)
			}
		} else {
			err = parentDir(next)
		}
		if err != nil {
			next.Close()
			return nil, fmt.Errorf("checkpoint dir: %w", err)
		}
	}
	return cur, nil
}

// parentDir checks that a dir between the root and a task's checkpoint
// dir is root's, and makes it 0711.
func parentDir(d *nofollow.Dir) error {
	st, err := d.Stat()
	if err != nil {
		return err
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not root: a task's checkpoint dir must be the only one its user owns", d.Path(), st.Uid)
	}
	if st.Mode&0o7777 != checkpointParentPerms {
		return d.Chmod(checkpointParentPerms)
	}
	return nil
}

// handOver gives the checkpoint dir d, and what earlier holders wrote in
// it, to who (above). It reports what it changed and what it left.
func handOver(logger hclog.Logger, d *nofollow.Dir, who taskUser, lo, hi int) error {
	if os.Geteuid() != 0 {
		return d.Chmod(checkpointDirPerms)
	}
	st, err := d.Stat()
	if err != nil {
		return err
	}
	prev := int(st.Uid)
	if prev != who.uid || int(st.Gid) != who.gid {
		take := func(e unix.Stat_t) bool {
			u := int(e.Uid)
			return u != who.uid && (u >= lo && u <= hi || prev != 0 && u == prev)
		}
		changed, skipped, err := nofollow.ChownTree(d, who.uid, who.gid, take)
		if err != nil {
			return fmt.Errorf("checkpoint dir %s: give it to uid %d: %w", d.Path(), who.uid, err)
		}
		if changed > 0 || len(skipped) > 0 {
			logger.Info("handed the checkpoint dir over to the task's uid", "dir", d.Path(), "uid", who.uid,
				"previous_owner", prev, "entries", changed, "left", skipped)
		}
	}
	if err := d.Chown(who.uid, who.gid); err != nil {
		return fmt.Errorf("checkpoint dir: give it to the task's user: %w", err)
	}
	return d.Chmod(checkpointDirPerms)
}

// resetCheckpointDir gives a task's checkpoint dir back to root (0700),
// once the uid that held it is released, so its next holder cannot enter;
// a dir another uid holds by now (the job's next allocation) is left.
func resetCheckpointDir(root *nofollow.Dir, names []string, uid int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	d, err := root.Walk(names, 0, func(path string, st unix.Stat_t) error {
		if st.Uid != 0 {
			return fmt.Errorf("%s is owned by uid %d, not root", path, st.Uid)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := d.Stat()
	if err != nil || int(st.Uid) != uid {
		return err
	}
	if err := d.Chown(0, 0); err != nil {
		return err
	}
	return d.Chmod(checkpointDirPerms)
}
