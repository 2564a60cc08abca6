package driver

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/base"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// TestTaskUser: tasks run as their `user`, else the driver's default_user
// (nobody); root only for jobs in allow_root_jobs; the checkpoint dir belongs
// to the task's user.
func TestTaskUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a driver running as root can run tasks as another user")
	}
	nobody, err := user.Lookup(DefaultTaskUser)
	if err != nil {
		t.Skipf("no user %q on this host: %v", DefaultTaskUser, err)
	}
	cases := []struct {
		name      string
		taskUser  string
		allow     []string
		wantUID   string
		wantError string
	}{
		{"default user", "", nil, nobody.Uid, ""},
		{"task names nobody", "nobody", nil, nobody.Uid, ""},
		{"root refused", "root", nil, "", `user: "root" is root, and job "train" in namespace "default" is not in the driver's allow_root_jobs`},
		{"root refused for another job", "root", []string{"default/other"}, "", "allow_root_jobs"},
		{"root allowed for the job", "root", []string{"default/train"}, "0", ""},
		{"unknown user", "no-such-user-themis", nil, "", `user: "no-such-user-themis"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, false, nil)
			// A checkpoint root the task's user can reach (t.TempDir's
			// parent is root's 0700).
			root, err := os.MkdirTemp("", "themis-ckpt-")
			must.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(root) })
			must.NoError(t, os.Chmod(root, 0o711))
			cfg, _ := e.d.current()
			cfg.CheckpointRoot, cfg.DefaultUser, cfg.AllowRootJobs = root, DefaultTaskUser, c.allow
			var data []byte
			must.NoError(t, base.MsgPackEncode(&data, &cfg))
			must.NoError(t, e.h.SetConfig(&base.Config{PluginConfig: data}))
			e.ckptDir = root

			task, tc := newTask("user", `id -u > "$THEMIS_CHECKPOINT_DIR/uid" && mkdir "$THEMIS_CHECKPOINT_DIR/step-1" && touch "$THEMIS_CHECKPOINT_DIR/step-1/COMPLETE"`,
				spec.Stanza{GPUs: 1})
			task.User = c.taskUser
			cleanup := e.h.MkAllocDir(task, false)
			t.Cleanup(cleanup)
			// The harness's alloc dirs are under a 0700 temp dir of root's.
			must.NoError(t, os.Chmod(filepath.Dir(task.AllocDir), 0o755))
			_, _ = taskCgroups(t, e, task, testMemoryMB)
			must.NoError(t, task.EncodeConcreteDriverConfig(&tc))
			_, _, err = e.h.StartTask(task)
			if c.wantError != "" {
				must.ErrorContains(t, err, c.wantError)
				return
			}
			must.NoError(t, err)
			t.Cleanup(func() { _ = e.h.DestroyTask(task.ID, true) })
			res := e.wait(t, task.ID, 10*time.Second)
			must.Eq(t, 0, res.ExitCode, must.Sprintf("exit %+v", res))

			dir := e.taskCheckpointDir("user")
			b, err := os.ReadFile(filepath.Join(dir, "uid"))
			must.NoError(t, err)
			must.Eq(t, c.wantUID, strings.TrimSpace(string(b)))
			fi, err := os.Stat(dir)
			must.NoError(t, err)
			must.Eq(t, c.wantUID, strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)))
			must.Eq(t, os.FileMode(0o700), fi.Mode().Perm())
			for d := filepath.Dir(dir); d != root; d = filepath.Dir(d) {
				fi, err := os.Stat(d)
				must.NoError(t, err)
				must.Eq(t, os.FileMode(0o711), fi.Mode().Perm(), must.Sprint(d))
			}
			st, err := e.h.InspectTask(task.ID)
			must.NoError(t, err)
			want := c.taskUser
			if want == "" {
				want = DefaultTaskUser
			}
			must.Eq(t, want, st.DriverAttributes["user"])
		})
	}
}

func TestRootAllowed(t *testing.T) {
	must.True(t, rootAllowed([]string{"*"}, "default", "a"))
	must.True(t, rootAllowed([]string{"ops/a", "default/a"}, "default", "a"))
	must.False(t, rootAllowed([]string{"ops/a"}, "default", "a"))
	must.False(t, rootAllowed(nil, "default", "a"))
	must.EqError(t, Config{CheckpointRoot: "/x", KeepCheckpoints: 1, AllowRootJobs: []string{"justajob"}}.validate(),
		`allow_root_jobs: want "<namespace>/<job>" or "*", got "justajob"`)
}
