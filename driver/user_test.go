package driver

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestTaskUser: who a task runs as. With the plugin's defaults, a dynamic
// uid of its allocation's own; a `user` only where allowed_users lists it
// for the task's namespace (or for every namespace); root only where
// allow_root_jobs names the namespace or the job; default_user when the
// operator sets one. The checkpoint dir is the task's user's, 0700, the
// dirs above it root's, 0711. Errors name the field.
func TestTaskUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a driver running as root can run tasks as another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody on this host: %v", err)
	}
	const dynamic = "dynamic"
	cases := []struct {
		name        string
		taskUser    string
		defaultUser string
		allowed     []string
		allowRoot   []string
		wantUID     string // dynamic: one of the range
		wantError   string
	}{
		{"dynamic by default", "", "", nil, nil, dynamic, ""},
		{"default_user", "", "nobody", nil, nil, nobody.Uid, ""},
		{"named user not allowed", "nobody", "", nil, nil, "",
			`user: "nobody" is not among the users the driver's allowed_users lets tasks of namespace "default" name (none)`},
		{"allowed in its namespace", "nobody", "", []string{"default/nobody"}, nil, nobody.Uid, ""},
		{"allowed in another namespace only", "nobody", "", []string{"research/nobody", "default/daemon"}, nil, "", `(daemon)`},
		{"allowed in every namespace", "nobody", "", []string{"*/nobody"}, nil, nobody.Uid, ""},
		{"root refused", "root", "", nil, nil, "",
			`user: "root" is root, and the driver's allow_root_jobs names neither namespace "default" nor job "user-job" in it`},
		{"root in allowed_users is not enough", "root", "", []string{"default/root"}, nil, "", "allow_root_jobs"},
		{"root for another namespace", "root", "", nil, []string{"research"}, "", "allow_root_jobs"},
		{"root for another job", "root", "", nil, []string{"default/other"}, "", "allow_root_jobs"},
		{"root for the namespace", "root", "", nil, []string{"default"}, "0", ""},
		{"root for the job", "root", "", nil, []string{"default/user-job"}, "0", ""},
		{"default_user root needs allow_root_jobs", "", "root", nil, nil, "", `default_user: "root" is root`},
		{"unknown user", "no-such-user-themis", "", []string{"default/no-such-user-themis"}, nil, "", `user: "no-such-user-themis"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := prodEnv(t, nil, func(cfg *Config) {
				cfg.DefaultUser, cfg.AllowedUsers, cfg.AllowRootJobs = c.defaultUser, c.allowed, c.allowRoot
			})
			task, tc := jobTask("user-job", "user", `id -u > "$THEMIS_CHECKPOINT_DIR/uid" && mkdir "$THEMIS_CHECKPOINT_DIR/step-1" && touch "$THEMIS_CHECKPOINT_DIR/step-1/COMPLETE"`)
			task.User = c.taskUser
			_, err := e.start(t, task, tc, false)
			if c.wantError != "" {
				must.ErrorContains(t, err, c.wantError)
				return
			}
			must.NoError(t, err)
			res := e.wait(t, task.ID, 10*time.Second)
			must.Eq(t, 0, res.ExitCode, must.Sprintf("exit %+v", res))

			dir := e.ckptDirOf(task)
			uid := waitFile(t, filepath.Join(dir, "uid"), time.Second)
			if c.wantUID == dynamic {
				n, err := strconv.Atoi(uid)
				must.NoError(t, err)
				must.Between(t, DefaultDynamicUserMin, n, DefaultDynamicUserMax)
			} else {
				must.Eq(t, c.wantUID, uid)
			}
			fi, err := os.Stat(dir)
			must.NoError(t, err)
			must.Eq(t, os.FileMode(0o700), fi.Mode().Perm())
			st, err := e.h.InspectTask(task.ID)
			must.NoError(t, err)
			want := c.taskUser
			switch {
			case c.wantUID == dynamic:
				want = "themis-" + uid
			case want == "":
				want = c.defaultUser
			}
			must.Eq(t, want, st.DriverAttributes["user"])
			// Held while the task lives: still the task's uid's.
			must.Eq(t, uid, strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)))
			for d := filepath.Dir(dir); d != e.ckptDir; d = filepath.Dir(d) {
				fi, err := os.Stat(d)
				must.NoError(t, err)
				must.Eq(t, os.FileMode(0o711), fi.Mode().Perm(), must.Sprint(d))
				must.Eq(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, must.Sprint(d))
			}
		})
	}
}

func TestUserPolicy(t *testing.T) {
	must.True(t, rootAllowed([]string{"*"}, "default", "a"))
	must.True(t, rootAllowed([]string{"ops/a", "default/a"}, "default", "a"))
	must.True(t, rootAllowed([]string{"default"}, "default", "a"))
	must.False(t, rootAllowed([]string{"ops/a", "ops"}, "default", "a"))
	must.False(t, rootAllowed(nil, "default", "a"))
	must.True(t, userAllowed([]string{"default/alice"}, "default", "alice"))
	must.True(t, userAllowed([]string{"*/alice"}, "research", "alice"))
	must.False(t, userAllowed([]string{"research/alice"}, "default", "alice"))
	must.Eq(t, "alice, bob", describeAllowed([]string{"research/carol", "default/bob", "*/alice", "default/alice"}, "default"))

	base := Config{CheckpointRoot: "/x", KeepCheckpoints: 1}
	cases := []struct {
		edit func(*Config)
		err  string
	}{
		{func(c *Config) { c.AllowRootJobs = []string{"default", "ops/job/with/slashes", "*"} }, ""},
		{func(c *Config) { c.AllowRootJobs = []string{"not a namespace"} }, `allow_root_jobs: want a namespace, "<namespace>/<job>" or "*", got "not a namespace"`},
		{func(c *Config) { c.AllowedUsers = []string{"default/alice", "*/bob"} }, ""},
		{func(c *Config) { c.AllowedUsers = []string{"alice"} }, `allowed_users: want "<namespace>/<user>" or "*/<user>", got "alice"`},
		{func(c *Config) { c.AllowedUsers = []string{"default/"} }, `allowed_users: want "<namespace>/<user>" or "*/<user>", got "default/"`},
		{func(c *Config) { c.DynamicUserMin, c.DynamicUserMax = 5000, 4000 }, "dynamic_user_min, dynamic_user_max: want 1 <= min <= max <= 2147483646, got 5000 and 4000"},
		{func(c *Config) { c.DynamicUserMin, c.DynamicUserMax = 0, 10 }, "got 0 and 10"},
		{func(c *Config) { c.SupplementaryGroups = []string{"0"} }, `supplementary_groups: "0" is group 0; group 0 (root's) is never given to tasks`},
		{func(c *Config) { c.SupplementaryGroups = []string{"no-such-group-themis"} }, `supplementary_groups: "no-such-group-themis"`},
	}
	for _, c := range cases {
		cfg := base
		c.edit(&cfg)
		err := cfg.validate()
		if c.err == "" {
			must.NoError(t, err)
			continue
		}
		must.ErrorContains(t, err, c.err)
	}
}
