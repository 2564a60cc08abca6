package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// One identity per allocation, as Nomad's exec2 driver does with its
// dynamic workload users: a task that names no user runs as a uid from
// dynamic_user_min..dynamic_user_max that its allocation holds from its
// first task's start until its last task is destroyed. Two allocations
// never hold one uid at once, so their processes cannot signal or trace
// each other, read each other's /proc or write into each other's dirs.
//
// The checkpoint root may be shared by several clients (so a job resumes
// on another node), and so are the checkpoint dirs the uids own: a uid
// must be unique across them, not only on one node. It is claimed in the
// checkpoint root itself: <root>/.themis/uids/<uid> is a directory (made
// with mkdir, which only one caller wins) holding one file per task that
// holds the uid (<alloc>.<task>, JSON: host, alloc, task, its checkpoint
// dir). The last holder out removes the directory (rmdir fails while any
// holder is left), and the uid is free again. A uid is not taken while a
// process on this host runs as it (say, a task whose driver crashed and
// whose claim a sweep removed) or while /etc/passwd names it.
//
// The parts of a multi-node gang share one checkpoint dir, so they share
// one uid: rank 0 claims it and publishes it in its rendezvous record
// (lease.GangMember.UID), the other ranks add their holder files to it.

// claimStale is how old a holder of this host's must be, its allocation
// gone from the driver and no process running as its uid, before the
// fingerprint's sweep removes it (a driver that crashed between claim
// and release).
const claimStale = time.Minute

// uidsDir is where claims live, below the checkpoint root.
var uidsDir = []string{".themis", "uids"}

// holder is one task's claim of a uid.
type holder struct {
	Host  string    `json:"host"`
	Alloc string    `json:"alloc"`
	Task  string    `json:"task"`
	Dir   []string  `json:"dir"` // the task's checkpoint dir, below the root
	Since time.Time `json:"since"`
}

func (h holder) file() string { return url.PathEscape(h.Alloc) + "." + url.PathEscape(h.Task) }

// identities is the driver's view of the uids its allocations hold.
type identities struct {
	mu      sync.Mutex
	byAlloc map[string]*allocUID
	next    int // offset into the range where the next search starts
}

type allocUID struct {
	uid   int
	tasks int
}

func newIdentities() *identities { return &identities{byAlloc: map[string]*allocUID{}} }

// openUIDs opens (making it, root's, 0700) <root>/.themis/uids.
func openUIDs(root *nofollow.Dir) (*nofollow.Dir, error) {
	return root.Walk(uidsDir, 0o700, func(path string, st unix.Stat_t) error {
		return nofollow.SafeOwner(path, st)
	})
}

// acquire gives task h.Task of allocation h.Alloc its allocation's uid,
// claiming a free one for the allocation's first task: prefer first,
// when it is in the range (a restarted task's dir is still its old
// uid's), then the next ones round the range.
func (ids *identities) acquire(root *nofollow.Dir, lo, hi int, h holder, prefer int) (int, error) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	uids, err := openUIDs(root)
	if err != nil {
		return 0, fmt.Errorf("dynamic uid: %w", err)
	}
	defer uids.Close()
	if a, ok := ids.byAlloc[h.Alloc]; ok {
		if err := addHolder(uids, a.uid, h); err != nil {
			return 0, err
		}
		a.tasks++
		return a.uid, nil
	}
	busy, err := uidsRunning()
	if err != nil {
		return 0, fmt.Errorf("dynamic uid: %w", err)
	}
	size := hi - lo + 1
	for i := -1; i < size; i++ {
		uid := lo + (ids.next+i)%size
		if i < 0 {
			if prefer < lo || prefer > hi {
				continue
			}
			uid = prefer
		}
		if busy[uid] || inPasswd(uid) {
			continue
		}
		if err := unix.Mkdirat(uids.Fd(), strconv.Itoa(uid), 0o700); err != nil {
			if errors.Is(err, unix.EEXIST) {
				continue // held, here or by another client of the root
			}
			return 0, fmt.Errorf("dynamic uid: claim %d in %s: %w", uid, uids.Path(), err)
		}
		if err := addHolder(uids, uid, h); err != nil {
			_ = uids.RemoveDir(strconv.Itoa(uid))
			return 0, err
		}
		if i >= 0 {
			ids.next = (ids.next + i + 1) % size
		}
		ids.byAlloc[h.Alloc] = &allocUID{uid: uid, tasks: 1}
		return uid, nil
	}
	return 0, fmt.Errorf("dynamic_user_min, dynamic_user_max: all %d uids from %d to %d are held by allocations, run by a process or named in /etc/passwd", size, lo, hi)
}

// join adds task h to a uid another client's allocation claimed (a gang's
// rank 0); it fails when that claim is gone.
func (ids *identities) join(root *nofollow.Dir, uid int, h holder) error {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	uids, err := openUIDs(root)
	if err != nil {
		return fmt.Errorf("dynamic uid: %w", err)
	}
	defer uids.Close()
	if err := checkJoinable(uids, uid, h); err != nil {
		return err
	}
	if err := addHolder(uids, uid, h); err != nil {
		return err
	}
	if a, ok := ids.byAlloc[h.Alloc]; ok {
		a.tasks++
	} else {
		ids.byAlloc[h.Alloc] = &allocUID{uid: uid, tasks: 1}
	}
	return nil
}

// restore records, after a driver restart, that a recovered task holds
// uid; its holder file is written again if it went.
func (ids *identities) restore(root *nofollow.Dir, uid int, h holder) error {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if a, ok := ids.byAlloc[h.Alloc]; ok {
		a.tasks++
	} else {
		ids.byAlloc[h.Alloc] = &allocUID{uid: uid, tasks: 1}
	}
	uids, err := openUIDs(root)
	if err != nil {
		return err
	}
	defer uids.Close()
	if _, err := uids.Lstat(strconv.Itoa(uid)); err != nil {
		if err := unix.Mkdirat(uids.Fd(), strconv.Itoa(uid), 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	d, _, err := uids.Sub(strconv.Itoa(uid), 0)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.Lstat(h.file()); err == nil {
		return nil
	}
	return addHolder(uids, uid, h)
}

// release drops task h's hold of uid; the uid is free once no holder is
// left. shared reports that another holder still uses h's checkpoint dir
// (a gang's other rank), which must then stay the uid's.
func (ids *identities) release(root *nofollow.Dir, uid int, h holder) (shared bool, err error) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if a, ok := ids.byAlloc[h.Alloc]; ok {
		if a.tasks--; a.tasks <= 0 {
			delete(ids.byAlloc, h.Alloc)
		}
	}
	uids, err := openUIDs(root)
	if err != nil {
		return false, err
	}
	defer uids.Close()
	return dropHolder(uids, uid, h.file(), h.Dir)
}

// held reports the uid an allocation holds, if any.
func (ids *identities) held(alloc string) (int, bool) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	a, ok := ids.byAlloc[alloc]
	if !ok {
		return 0, false
	}
	return a.uid, true
}

// addHolder writes h's holder file into uids/<uid>.
func addHolder(uids *nofollow.Dir, uid int, h holder) error {
	d, _, err := uids.Sub(strconv.Itoa(uid), 0)
	if err != nil {
		return fmt.Errorf("dynamic uid %d: its claim is gone: %w", uid, err)
	}
	defer d.Close()
	if h.Host == "" {
		h.Host, _ = os.Hostname()
	}
	if h.Since.IsZero() {
		h.Since = time.Now().UTC()
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return d.WriteFileAtomic(h.file(), b, 0o600)
}

// dropHolder removes holder file name from uids/<uid> and the claim when
// it was the last; shared reports that a remaining holder has dir.
func dropHolder(uids *nofollow.Dir, uid int, name string, dir []string) (shared bool, err error) {
	d, _, err := uids.Sub(strconv.Itoa(uid), 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer d.Close()
	if err := d.Remove(name); err != nil {
		return false, err
	}
	names, err := d.Names()
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if hh, err := readHolder(d, n); err == nil && slices.Equal(hh.Dir, dir) {
			shared = true
		}
	}
	if len(names) == 0 {
		if err := uids.RemoveDir(strconv.Itoa(uid)); err != nil && !errors.Is(err, unix.ENOTEMPTY) {
			return shared, err
		}
	}
	return shared, nil
}

func readHolder(d *nofollow.Dir, name string) (holder, error) {
	var h holder
	b, err := d.ReadFile(name, 64<<10, 0)
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}

// uidsRunning is the set of uids (real, effective, saved or file-system)
// some process on this host runs as, from /proc/<pid>/status (which, not
// the owner of /proc/<pid>, tells a process that made itself
// non-dumpable).
func uidsRunning() (map[int]bool, error) {
	proc, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer proc.Close()
	names, err := proc.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		for _, uid := range procUIDs(n) {
			out[uid] = true
		}
	}
	return out, nil
}

// procUIDs reads the Uid line of /proc/<pid>/status.
func procUIDs(pid string) []int {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil
	}
	i := bytes.Index(b, []byte("\nUid:"))
	if i < 0 {
		return nil
	}
	line, _, _ := bytes.Cut(b[i+len("\nUid:"):], []byte("\n"))
	var out []int
	for _, f := range strings.Fields(string(line)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// inPasswd reports whether the user database names uid.
func inPasswd(uid int) bool {
	_, err := user.LookupId(strconv.Itoa(uid))
	return err == nil
}

// releaseIdentity drops a task's hold of its dynamic uid and, unless a
// gang's other rank still uses the dir, gives its checkpoint dir back to
// root while the uid still owns it; failures are logged (the fingerprint's
// sweep retries what a crash left).
func (d *Driver) releaseIdentity(logger hclog.Logger, rootPath string, who taskUser, h holder) {
	if !who.dynamic {
		return
	}
	root, err := openCheckpointRoot(rootPath)
	if err != nil {
		logger.Warn("cannot release the task's dynamic uid", "uid", who.uid, "error", err)
		return
	}
	defer root.Close()
	shared, err := d.ids.release(root, who.uid, h)
	if err != nil {
		logger.Warn("cannot release the task's dynamic uid", "uid", who.uid, "error", err)
	}
	if shared {
		return
	}
	removeLeftovers(logger, who.uid)
	if err := resetCheckpointDir(root, h.Dir, who.uid); err != nil {
		logger.Warn("cannot give the checkpoint dir back to root", "dir", h.Dir, "error", err)
	}
}

// restoreIdentity records that a task recovered after a driver restart
// holds its dynamic uid.
func (d *Driver) restoreIdentity(p protocol, cfg *drivers.TaskConfig) error {
	root, err := openCheckpointRoot(p.root)
	if err != nil {
		return err
	}
	defer root.Close()
	return d.ids.restore(root, p.who.uid, holder{Alloc: cfg.AllocID, Task: cfg.Name, Dir: p.names})
}
