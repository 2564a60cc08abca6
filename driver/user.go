package driver

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"

	"github.com/hashicorp/nomad/plugins/drivers"
)

// DefaultTaskUser is the user tasks that name none run as, as with Nomad's
// exec driver.
const DefaultTaskUser = "nobody"

// AllowRootAll in allow_root_jobs lets every job run tasks as root.
const AllowRootAll = "*"

// taskUser is who a task runs as.
type taskUser struct {
	// name is given to the executor; "" runs the task as the driver's own
	// user (a driver that is not root cannot switch users).
	name     string
	uid, gid int
}

// resolveUser decides who a task runs as: the task's `user`, else the
// plugin's default_user. Root is refused unless allow_root_jobs names the
// job. A driver that does not run as root runs every task as its own user
// and refuses a task that asks for another one. Errors name the field.
func resolveUser(pcfg Config, cfg *drivers.TaskConfig) (taskUser, error) {
	if os.Geteuid() != 0 {
		self, err := user.Current()
		if err != nil {
			return taskUser{}, fmt.Errorf("user: cannot look up the driver's own user: %w", err)
		}
		if cfg.User != "" && cfg.User != self.Username {
			return taskUser{}, fmt.Errorf("user: the driver runs as %q, not root, and cannot run a task as %q", self.Username, cfg.User)
		}
		return taskUser{uid: os.Getuid(), gid: os.Getgid()}, nil
	}
	name, field := cfg.User, "user"
	if name == "" {
		name, field = pcfg.DefaultUser, "default_user"
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
	if uid == 0 && !rootAllowed(pcfg.AllowRootJobs, cfg.Namespace, cfg.JobID) {
		return taskUser{}, fmt.Errorf("%s: %q is root, and job %q in namespace %q is not in the driver's allow_root_jobs",
			field, name, cfg.JobID, cfg.Namespace)
	}
	return taskUser{name: name, uid: uid, gid: gid}, nil
}

// rootAllowed reports whether allow lists the job as "<namespace>/<job>",
// or holds "*".
func rootAllowed(allow []string, namespace, jobID string) bool {
	return slices.Contains(allow, AllowRootAll) || slices.Contains(allow, namespace+"/"+jobID)
}
