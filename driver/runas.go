package driver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/themis-nomad/themis/driver/nofollow"
)

// The run-as shim. Nomad's executor, given a user, looks the user up and
// sets its groups with a slice made with its length and then appended to
// (drivers/shared/executor/executor_unix.go, setCmdUser, Nomad 1.11.3),
// so every task it starts as a user is also in group 0, root's; and it
// cannot run a task as a uid that no /etc/passwd entry names (a dynamic
// uid). So the driver gives the executor no user: the executor starts, as
// root, in the task's cgroups and process group, this binary as
//
//	themis-driver themis-run-as <uid> <gid> <groups|-> <env file> <tmp|-> <alloc dir|-> -- <command> <args>...
//
// which gives the task private temporary files and a view of the alloc
// root with its own allocation only (<tmp>, <alloc dir>: privatetmp.go),
// sets exactly the task's groups, gid and uid, sets no_new_privs (no
// setuid binary raises it again), and execs the command: same process, so
// the pid, process group and cgroups the executor knows are the task's.
//
// The task's environment does not pass through the executor: a root
// process started with a job's LD_PRELOAD would run the job's code as
// root. The driver writes it to a root-only file in the alloc dir, which
// the shim reads (refusing anything but a root-owned 0600 regular file),
// removes, and gives to the command after dropping root. The executor
// itself gets a fixed minimal environment.

// runAsArg makes this binary the shim (checked in init, before main).
const runAsArg = "themis-run-as"

// maxEnvFile caps the task environment file the shim reads.
const maxEnvFile = 8 << 20

// shimEnv is the executor's whole environment.
var shimEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

func init() {
	if len(os.Args) > 1 && os.Args[1] == runAsArg {
		err := runAs(os.Args[2:])
		fmt.Fprintf(os.Stderr, "themis-driver: cannot start the task: %v\n", err)
		os.Exit(126)
	}
}

// runAs is the shim: it returns only on failure.
func runAs(args []string) error {
	runtime.LockOSThread()
	if len(args) < 8 || args[6] != "--" {
		return fmt.Errorf("usage: %s <uid> <gid> <groups|-> <env file> <tmp|-> <alloc dir|-> -- <command> [args...]", runAsArg)
	}
	uid, err1 := strconv.Atoi(args[0])
	gid, err2 := strconv.Atoi(args[1])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	var groups []int
	if args[2] != "-" {
		for g := range strings.SplitSeq(args[2], ",") {
			n, err := strconv.Atoi(g)
			if err != nil {
				return fmt.Errorf("groups %q: %w", args[2], err)
			}
			groups = append(groups, n)
		}
	}
	env, err := takeEnvFile(args[3])
	if err != nil {
		return err
	}
	if args[4] != "-" {
		allocDir := args[5]
		if allocDir == "-" {
			allocDir = ""
		}
		if err := enterPrivateTmp(args[4], allocDir, uid, gid); err != nil {
			return err
		}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups %v: %w", groups, err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	cmd := args[7]
	return fmt.Errorf("exec %s as uid %d: %w", cmd, uid, syscall.Exec(cmd, append([]string{cmd}, args[8:]...), env))
}

// takeEnvFile reads and removes the environment file the driver wrote:
// NUL-separated KEY=value entries.
func takeEnvFile(path string) ([]string, error) {
	d, err := nofollow.OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b, err := d.ReadFile(filepath.Base(path), maxEnvFile, 0)
	if err == nil {
		var st unix.Stat_t
		if st, err = d.Lstat(filepath.Base(path)); err == nil && st.Mode&0o077 != 0 {
			err = fmt.Errorf("%s has mode %04o; want 0600", path, st.Mode&0o7777)
		}
	}
	_ = d.Remove(filepath.Base(path))
	if err != nil {
		return nil, fmt.Errorf("task environment: %w", err)
	}
	var env []string
	for kv := range strings.SplitSeq(string(b), "\x00") {
		if kv != "" {
			env = append(env, kv)
		}
	}
	return env, nil
}

// shimLaunch is what the executor runs for a task: the shim's command
// line and the environment file it reads, written here.
type shimLaunch struct {
	cmd     string
	args    []string
	envFile string
}

// prepareShim writes the task's environment to a root-only file in the
// alloc dir (root's: Nomad makes it 0755) and returns the shim's command
// line for who running path with args, with private temporary files as
// tmp says (privateTmpArg; "" for none) and, with them, an alloc root
// holding only allocDir.
func prepareShim(allocDir, task string, who taskUser, path, tmp string, args, env []string) (shimLaunch, error) {
	self, err := os.Executable()
	if err != nil {
		return shimLaunch{}, fmt.Errorf("run-as shim: find the driver's binary: %w", err)
	}
	d, err := nofollow.OpenDir(allocDir)
	if err != nil {
		return shimLaunch{}, fmt.Errorf("run-as shim: %w", err)
	}
	defer d.Close()
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return shimLaunch{}, err
	}
	name := ".themis-" + url.PathEscape(task) + ".env-" + hex.EncodeToString(rnd[:])
	if err := d.WriteFileAtomic(name, []byte(strings.Join(env, "\x00")), 0o600); err != nil {
		return shimLaunch{}, fmt.Errorf("run-as shim: write the task's environment: %w", err)
	}
	groups := "-"
	if len(who.groups) > 0 {
		gs := make([]string, len(who.groups))
		for i, g := range who.groups {
			gs[i] = strconv.Itoa(g)
		}
		groups = strings.Join(gs, ",")
	}
	envFile := filepath.Join(allocDir, name)
	ownAlloc := allocDir
	if tmp == "" {
		tmp, ownAlloc = "-", "-"
	}
	return shimLaunch{
		cmd:     self,
		args:    append([]string{runAsArg, strconv.Itoa(who.uid), strconv.Itoa(who.gid), groups, envFile, tmp, ownAlloc, "--", path}, args...),
		envFile: envFile,
	}, nil
}

// discard removes the environment file of a shim that did not run.
func (s shimLaunch) discard() { _ = os.Remove(s.envFile) }

// checkCommand tells, before the task starts, that its user cannot run
// path: the shim execs it after dropping root, where a directory on the
// way that others cannot search (a checkout under a 0700 home) would fail
// it with a bare "permission denied". The path is opened as the task's
// user (asUser), so every directory is checked as the exec will be.
func checkCommand(path string, who taskUser) error {
	if who.self || who.uid == 0 {
		return nil
	}
	return asUser(who, func() error {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("command: %s cannot be reached as the task's user %s (uid %d): %w; every directory on its path must be searchable by other users (o+x)",
				path, who.name, who.uid, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("command: %s: %w", path, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			// exec would fail with a bare "permission denied" (EACCES)
			return fmt.Errorf("command: %s is a %s, not a program: executing it fails (permission denied)", path, nofollow.Kind(st.Mode))
		}
		inGroup := int(st.Gid) == who.gid || slices.Contains(who.groups, int(st.Gid))
		if st.Mode&0o001 == 0 && !(int(st.Uid) == who.uid && st.Mode&0o100 != 0) && !(inGroup && st.Mode&0o010 != 0) {
			return fmt.Errorf("command: %s (mode %04o, uid %d) is not executable by the task's user %s (uid %d)",
				path, st.Mode&0o7777, st.Uid, who.name, who.uid)
		}
		return nil
	})
}
