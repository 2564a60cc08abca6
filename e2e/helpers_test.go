package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// helloJob turns examples/jobs/hello.nomad.hcl into an API job with the nomad
// CLI's own parser (`nomad job run -output`, as a user's `nomad job run`
// would parse it) and renames the job.
func helloJob(t testing.TB, id string, steps int, gpus int) *nomadapi.Job {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(env.root, "examples", "jobs", "hello.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	hcl := string(src)
	if gpus != 2 {
		hcl = strings.Replace(hcl, "gpus         = 2", fmt.Sprintf("gpus         = %d", gpus), 1)
	}
	file := filepath.Join(t.TempDir(), "hello.nomad.hcl")
	if err := os.WriteFile(file, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(env.nomadBin, "job", "run", "-output",
		"-var", "hello_bin="+env.helloBin, "-var", fmt.Sprintf("steps=%d", steps), file)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nomad job run -output: %v: %s", err, stderrOf(err))
	}
	var wrapped struct{ Job *nomadapi.Job }
	if err := json.Unmarshal(out, &wrapped); err != nil || wrapped.Job == nil {
		t.Fatalf("decode job JSON: %v\n%s", err, out)
	}
	wrapped.Job.ID, wrapped.Job.Name = &id, &id
	return wrapped.Job
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

func register(t testing.TB, job *nomadapi.Job) {
	t.Helper()
	if _, _, err := env.nomad.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v", *job.ID, err)
	}
	t.Cleanup(func() { purge(*job.ID) })
}

// purge removes a test's job from Nomad. A job the planner holds is
// stopped first, and given a few seconds for the planner to take it as
// finished (its tag and record removed): a held job purged outright is
// reported purged, its record kept (docs/design.md, "Held jobs").
func purge(id string) {
	if j, _, err := env.nomad.Jobs().Info(id, nil); err == nil && !*j.Stop && (j.Meta["themis.held"] != "" || j.Meta["themis.suspended"] != "") {
		_, _, _ = env.nomad.Jobs().Deregister(id, false, nil)
		key := lease.RecordKey(core.JobKey{Namespace: "default", ID: id})
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if p, _, err := env.consul.KV().Get(key, nil); err == nil && p == nil {
				break
			}
		}
	}
	_, _, _ = env.nomad.Jobs().Deregister(id, true, nil)
}

// eventually polls cond every 100ms until it returns true or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
}

func jobLease(t testing.TB, id string) *lease.JobLease {
	t.Helper()
	return readKV[lease.JobLease](t, env.consul, lease.JobKey("default", id))
}

func gpuLease(t testing.TB, gpu string) *lease.GPULease {
	t.Helper()
	return readKV[lease.GPULease](t, env.consul, lease.GPUKey(gpu))
}

// readKV reads the JSON value at key from Consul c, nil when there is none;
// a read or decode error fails the test.
func readKV[T any](t testing.TB, c *consulapi.Client, key string) *T {
	t.Helper()
	p, _, err := c.KV().Get(key, nil)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if p == nil {
		return nil
	}
	var v T
	if err := json.Unmarshal(p.Value, &v); err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
	return &v
}

func jobStatus(t testing.TB, id string) *lease.JobStatus {
	t.Helper()
	p, _, err := env.consul.KV().Get(lease.StatusKey(core.JobKey{Namespace: "default", ID: id}), nil)
	if err != nil || p == nil {
		return nil
	}
	var st lease.JobStatus
	if err := json.Unmarshal(p.Value, &st); err != nil {
		t.Fatalf("decode status of %s: %v", id, err)
	}
	return &st
}

func allocs(t testing.TB, id string) []*nomadapi.AllocationListStub {
	t.Helper()
	as, _, err := env.nomad.Jobs().Allocations(id, true, nil)
	if err != nil {
		t.Fatalf("allocations of %s: %v", id, err)
	}
	return as
}

func waitDead(t testing.TB, id string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "job "+id+" to finish", func() (bool, error) {
		j, _, err := env.nomad.Jobs().Info(id, nil)
		if err != nil {
			return false, err
		}
		return finishedInNomad(j), fmt.Errorf("status %s, meta %v", *j.Status, j.Meta)
	})
}

// finishedInNomad reports whether Nomad has a job dead and not held by the
// planner: a held job (queued or suspended) is dead at count 0 too, its
// version naming the hold (themis.held) or the suspension
// (themis.suspended) in its meta.
func finishedInNomad(j *nomadapi.Job) bool {
	return *j.Status == "dead" && j.Meta["themis.held"] == "" && j.Meta["themis.suspended"] == ""
}

// taskStdout reads the hello task's stdout log of an allocation.
func taskStdout(t testing.TB, allocID string) string {
	t.Helper()
	out, err := readStdout(allocID)
	if err != nil {
		t.Fatalf("read stdout of alloc %s: %v", allocID, err)
	}
	return out
}

func readStdout(allocID string) (string, error) { return allocStdout(env.nomad, allocID) }

// allocStdout is what hello printed in an allocation of the Nomad at c.
func allocStdout(c *nomadapi.Client, allocID string) (string, error) {
	a, _, err := c.Allocations().Info(allocID, nil)
	if err != nil {
		return "", err
	}
	return catStdout(c, a)
}

// catStdout is what hello printed in allocation a.
func catStdout(c *nomadapi.Client, a *nomadapi.Allocation) (string, error) {
	r, err := c.AllocFS().Cat(a, "alloc/logs/hello.stdout.0", nil)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

var visibleRE = regexp.MustCompile(`hello: visible GPUs NVIDIA_VISIBLE_DEVICES=(\S*) CUDA_VISIBLE_DEVICES=(\S*)`)

// visibleGPUs extracts what the task saw in its environment.
func visibleGPUs(t testing.TB, stdout string) (ids, indexes []string) {
	t.Helper()
	m := visibleRE.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("hello did not print its GPUs; stdout:\n%s", stdout)
	}
	return strings.Split(m[1], ","), strings.Split(m[2], ",")
}

// checkSeesLeased fails the test unless the task (who) whose stdout this is
// saw exactly the GPUs of its lease, or of its lease's part, in any order.
func checkSeesLeased(t testing.TB, who, stdout string, leased []string) {
	t.Helper()
	visible, _ := visibleGPUs(t, stdout)
	if !slices.Equal(slices.Sorted(slices.Values(visible)), slices.Sorted(slices.Values(leased))) {
		t.Fatalf("%s sees GPUs %v, its lease names %v", who, visible, leased)
	}
}
