package driver

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/plugins/drivers"
)

// Who a task runs as (docs/hardening.md):
//
//   - a task that names no `user` runs as a dynamic uid of its
//     allocation's own (identity.go), its group the same number, unless
//     the operator set default_user;
//   - a task's `user` is honoured only when allowed_users lists it for the
//     task's namespace (or for "*"), and root (any name for uid 0) only
//     where allow_root_jobs names the namespace, the job, or "*";
//   - no task has supplementary groups but supplementary_groups.
//
// The task is started by the run-as shim (runas.go), which sets exactly
// these ids, not by Nomad's executor, which adds group 0.

// DefaultTaskUser is the user a driver not running as root would name:
// kept for callers that want Nomad exec's old default. The driver's own
// default is a dynamic uid.
const DefaultTaskUser = "nobody"

// AllowRootAll in allow_root_jobs or allowed_users means every namespace.
const AllowRootAll = "*"

// maxDynamicUID bounds dynamic uids below the 32-bit overflow id.
const maxDynamicUID = 1<<31 - 2

// taskUser is who a task runs as.
type taskUser struct {
	// name is for logs, the task's USER and LOGNAME and the task's
	// status: the user's name, or themis-<uid> for a dynamic uid.
	name     string
	uid, gid int
	// groups are the supplementary groups (supplementary_groups).
	groups []int
	home   string
	// dynamic: the uid comes from the dynamic range and is held for the
	// allocation (identity.go); resolveUser leaves uid and gid 0.
	dynamic bool
	// self: the driver is not root and runs the task as itself.
	self bool
}

// resolveUser decides who a task runs as (above). A driver that does not
// run as root runs every task as its own user and refuses a task that
// asks for another one. Errors name the field.
func resolveUser(pcfg Config, cfg *drivers.TaskConfig) (taskUser, error) {
	if os.Geteuid() != 0 {
		self, err := user.Current()
		if err != nil {
			return taskUser{}, fmt.Errorf("user: cannot look up the driver's own user: %w", err)
		}
		if cfg.User != "" && cfg.User != self.Username {
			return taskUser{}, fmt.Errorf("user: the driver runs as %q, not root, and cannot run a task as %q", self.Username, cfg.User)
		}
		return taskUser{name: self.Username, uid: os.Getuid(), gid: os.Getgid(), home: self.HomeDir, self: true}, nil
	}
	groups, err := supplementaryGIDs(pcfg.SupplementaryGroups)
	if err != nil {
		return taskUser{}, err
	}
	name, field := cfg.User, "user"
	if name == "" {
		name, field = pcfg.DefaultUser, "default_user"
	}
	if name == "" {
		return taskUser{groups: groups, dynamic: true}, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return taskUser{}, fmt.Errorf("%s: %q: %w", field, name, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return taskUser{}, fmt.Errorf("%s: %q has a non-numeric uid %q", field, name, u.Uid)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return taskUser{}, fmt.Errorf("%s: %q has a non-numeric gid %q", field, name, u.Gid)
	}
	switch {
	case uid == 0 && !rootAllowed(pcfg.AllowRootJobs, cfg.Namespace, cfg.JobID):
		return taskUser{}, fmt.Errorf("%s: %q is root, and the driver's allow_root_jobs names neither namespace %q nor job %q in it",
			field, name, cfg.Namespace, cfg.JobID)
	case uid != 0 && field == "user" && !userAllowed(pcfg.AllowedUsers, cfg.Namespace, name):
		return taskUser{}, fmt.Errorf("user: %q is not among the users the driver's allowed_users lets tasks of namespace %q name (%s); leave user out to run as the allocation's own uid",
			name, cfg.Namespace, describeAllowed(pcfg.AllowedUsers, cfg.Namespace))
	}
	return taskUser{name: name, uid: uid, gid: gid, groups: groups, home: u.HomeDir}, nil
}

// rootAllowed reports whether allow names the namespace, the job as
// "<namespace>/<job>", or holds "*".
func rootAllowed(allow []string, namespace, jobID string) bool {
	return slices.Contains(allow, AllowRootAll) || slices.Contains(allow, namespace) || slices.Contains(allow, namespace+"/"+jobID)
}

// userAllowed reports whether allowed lists name for the namespace or for
// every namespace.
func userAllowed(allowed []string, namespace, name string) bool {
	return slices.Contains(allowed, namespace+"/"+name) || slices.Contains(allowed, AllowRootAll+"/"+name)
}

// describeAllowed lists the users a namespace's tasks may name.
func describeAllowed(allowed []string, namespace string) string {
	var names []string
	for _, e := range allowed {
		if ns, u, _ := strings.Cut(e, "/"); ns == namespace || ns == AllowRootAll {
			names = append(names, u)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(slices.Compact(names), ", ")
}

// supplementaryGIDs resolves supplementary_groups (names or numeric
// gids); never group 0.
func supplementaryGIDs(names []string) ([]int, error) {
	var out []int
	for _, n := range names {
		gid, err := strconv.Atoi(n)
		if err != nil {
			g, lerr := user.LookupGroup(n)
			if lerr != nil {
				return nil, fmt.Errorf("supplementary_groups: %q: %w", n, lerr)
			}
			if gid, err = strconv.Atoi(g.Gid); err != nil {
				return nil, fmt.Errorf("supplementary_groups: %q has a non-numeric gid %q", n, g.Gid)
			}
		}
		if gid <= 0 {
			return nil, fmt.Errorf("supplementary_groups: %q is group %d; group 0 (root's) is never given to tasks", n, gid)
		}
		if !slices.Contains(out, gid) {
			out = append(out, gid)
		}
	}
	return out, nil
}

// withUID fills in a dynamic uid the allocation holds: its group is the
// same number, its name themis-<uid>, its home the task dir.
func (u taskUser) withUID(uid int, home string) taskUser {
	u.uid, u.gid, u.home = uid, uid, home
	u.name = "themis-" + strconv.Itoa(uid)
	return u
}
