package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device"
	"github.com/themis-nomad/themis/e2e/devstack"
)

// shellForeign is a one-GPU themis job of driver (raw_exec or exec, the
// stanza in meta) running script, as user ("" for the driver's default).
func shellForeign(t testing.TB, driver, id, user, script string) *nomadapi.Job {
	t.Helper()
	job := rawExecJob(t, id, 1, map[string]string{"themis.gpus": "1"})
	task := job.TaskGroups[0].Tasks[0]
	task.Driver, task.User = driver, user
	task.Config["command"] = "/bin/sh"
	task.Config["args"] = []any{"-c", script}
	return job
}

// probe is a script that tries to read each path and says so.
func probe(paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "if cat %q >/dev/null 2>&1; then echo 'read %s'; else echo 'denied %s'; fi; ", p, p, p)
	}
	return b.String()
}

// Jobs of the exec and raw_exec drivers cannot read another job's
// checkpoint: not a themis task's (its dir is its allocation's dynamic
// uid's, 0700, below root's 0711 dirs), not an exec task's (the device
// plugin mounts each exec or docker job's own dir into it, below root's
// 0700 dirs on the host; the exec attacker sees only its own at
// /themis-checkpoints). A raw_exec themis job that would run as root is
// rejected. Before: themis tasks ran as root in the dev stack, every
// exec and docker job had the whole checkpoint root mounted (every exec
// job as nobody: each could read the others'), and a raw_exec job ran as
// the client's root and read everything.
func TestJobsCannotReadOthersCheckpoints(t *testing.T) {
	skipWithoutExec(t)
	const victim, execVictim = "e2e-iso-victim", "e2e-iso-exec-victim"
	const rawRoot, rawNobody, execAttacker = "e2e-iso-raw-root", "e2e-iso-raw-nobody", "e2e-iso-exec-attacker"
	data := env.stack.DataDir()
	root := devstack.CheckpointRoot(data)

	trainJob{gpus: 1, shell: `echo s3cret > "$THEMIS_CHECKPOINT_DIR/secret"; exec sleep 300`}.run(t, victim)
	register(t, shellForeign(t, "exec", execVictim, "",
		`mkdir -p "$THEMIS_CHECKPOINT_DIR" && echo s3cret > "$THEMIS_CHECKPOINT_DIR/secret"`))
	themisSecret := filepath.Join(root, "default", victim, "train", "hello", "secret")
	execSecret := filepath.Join(device.JobCheckpointDir(root, "default", execVictim), "train", "hello", "secret")
	for _, p := range []string{themisSecret, execSecret} {
		eventually(t, 90*time.Second, p+" written", func() (bool, error) {
			_, err := os.Stat(p)
			return err == nil, err
		})
	}

	register(t, shellForeign(t, "raw_exec", rawRoot, "", probe(themisSecret)))
	register(t, shellForeign(t, "raw_exec", rawNobody, "nobody", probe(themisSecret, execSecret)+"ls "+root+" "+root+"/.themis 2>&1"))
	// The exec attacker looks where the whole root used to be mounted.
	register(t, shellForeign(t, "exec", execAttacker, "",
		`echo "listing: [$(ls -A /themis-checkpoints 2>&1)]"; `+probe("/themis-checkpoints/default/"+execVictim+"/train/hello/secret",
			"/themis-checkpoints/default/"+victim+"/train/hello/secret", "/themis-checkpoints/../"+execVictim+"/train/hello/secret")))

	eventually(t, 30*time.Second, rawRoot+" rejected", func() (bool, error) {
		st := jobStatus(t, rawRoot)
		return st != nil && st.State == "rejected" && strings.Contains(st.Reason, "raw_exec themis task names no user"), fmt.Errorf("status %+v", st)
	})
	for _, id := range []string{rawNobody, execAttacker} {
		waitDead(t, id, 120*time.Second)
		as := allocs(t, id)
		if len(as) == 0 {
			t.Fatalf("%s ran no allocation", id)
		}
		out := taskStdout(t, as[0].ID)
		t.Logf("%s:\n%s", id, out)
		if strings.Contains(out, "read ") || !strings.Contains(out, "denied ") {
			t.Errorf("%s read another job's checkpoint (or probed nothing):\n%s", id, out)
		}
		if id == execAttacker && !strings.Contains(out, "listing: []") {
			t.Errorf("the exec job sees more than its own empty dir at /themis-checkpoints:\n%s", out)
		}
	}
}
