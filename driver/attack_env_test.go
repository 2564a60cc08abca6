package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/themis-nomad/themis/planner/spec"
)

// The attack tests (identity_test.go, ckptdir_attack_test.go,
// progress_attack_test.go, command_attack_test.go) run the driver as an
// operator deploys it: the plugin config's defaults (no default_user, no
// allow_root_jobs), a checkpoint root tasks can reach, as root. Each test
// is one attack of issue #30's list, written before its fix: on the driver
// before the fix each failed, the attack succeeding (docs/hardening.md has
// the table).

// prodEnv is a driver harness with the plugin config's defaults, its
// checkpoint root a fresh root-owned 0711 dir outside the test's 0700 temp
// dirs, alloc dirs reachable by the tasks' users. edit, if not nil, changes
// the config before it is set.
func prodEnv(t *testing.T, reader LeaseReader, edit func(*Config), opts ...Option) *testEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the attacks are on a driver that runs as root, as a Nomad client's plugins do")
	}
	e := newTestEnv(t, false, reader)
	root, err := os.MkdirTemp("", "themis-ckpt-")
	must.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	must.NoError(t, os.Chmod(root, 0o711))
	cfg := Config{CheckpointRoot: root}
	if edit != nil {
		edit(&cfg)
	}
	var data []byte
	must.NoError(t, base.MsgPackEncode(&data, &cfg))
	must.NoError(t, e.h.SetConfig(&base.Config{PluginConfig: data}))
	e.ckptDir = root
	e.openAllocDirs = true
	for _, o := range opts {
		o(e.d)
	}
	return e
}

// jobTask is newTask for job: the task runs script as a task of that job.
func jobTask(job, name, script string) (*drivers.TaskConfig, TaskConfig) {
	task, tc := newTask(name, script, spec.Stanza{GPUs: 1})
	task.JobID, task.JobName = job, job
	return task, tc
}

// ckptDirOf is a task's checkpoint dir under e's root.
func (e *testEnv) ckptDirOf(task *drivers.TaskConfig) string {
	return filepath.Join(e.ckptDir, task.Namespace, task.JobID, task.TaskGroupName, task.Name)
}

// waitFile waits until path exists (as root) and holds a line, and
// returns it.
func waitFile(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
