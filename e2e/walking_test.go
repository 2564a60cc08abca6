package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/nomad"
)

// gpuIndexes maps GPU ID to node-local index from the Nomad node's themis
// fingerprint, the same way the planner reads it.
func gpuIndexes(t *testing.T) map[string]int {
	t.Helper()
	stubs, _, err := env.nomad.Nodes().List(&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, s := range stubs {
		n, ok, err := nomad.NodeFromNomad(s)
		if err != nil || !ok {
			continue
		}
		for _, g := range n.GPUs {
			out[g.ID] = g.Index
		}
	}
	if len(out) == 0 {
		t.Fatal("no themis GPUs in Nomad")
	}
	return out
}

// (a) A job runs on exactly the GPUs of its lease, the lease is in Consul KV
// while it runs, and it is gone after.
func TestJobRunsOnItsLeasedGPUs(t *testing.T) {
	const id = "e2e-leased"
	register(t, helloJob(t, id, 30, 2))

	var leased []string
	eventually(t, 30*time.Second, "a lease for "+id, func() (bool, error) {
		if l := jobLease(t, id); l != nil {
			leased = l.GPUs
			return true, nil
		}
		return false, nil
	})
	if len(leased) != 2 {
		t.Fatalf("lease has %d GPUs, want 2: %v", len(leased), leased)
	}
	for _, g := range leased {
		gl := gpuLease(t, g)
		if gl == nil || gl.JobID != id {
			t.Fatalf("GPU %s: per-GPU lease key missing or wrong: %+v", g, gl)
		}
	}

	// The job was pinned: node pool, node constraint and device IDs.
	job, _, err := env.nomad.Jobs().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if job.Meta[nomad.LeaseMeta] == "" || *job.NodePool == nomad.DefaultPendingPool {
		t.Fatalf("job not pinned: pool %q meta %v", *job.NodePool, job.Meta)
	}

	var allocID string
	eventually(t, 30*time.Second, id+" to run", func() (bool, error) {
		for _, a := range allocs(t, id) {
			if a.ClientStatus == "running" || a.ClientStatus == "complete" {
				allocID = a.ID
				return true, nil
			}
		}
		return false, nil
	})
	// While it runs (30 steps x 100ms), the lease is still there.
	if l := jobLease(t, id); l == nil {
		t.Fatal("lease vanished while the job runs")
	}

	waitDead(t, id, 60*time.Second)
	a, _, err := env.nomad.Allocations().Info(allocID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.ClientStatus != "complete" {
		t.Fatalf("alloc %s ended %s, want complete: %+v", allocID, a.ClientStatus, a.TaskStates)
	}
	ids, indexes := visibleGPUs(t, taskStdout(t, allocID))
	got, want := slices.Clone(ids), slices.Clone(leased)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("task saw NVIDIA_VISIBLE_DEVICES=%v, lease holds %v", ids, leased)
	}
	idx := gpuIndexes(t)
	for i, g := range ids {
		if strconv.Itoa(idx[g]) != indexes[i] {
			t.Fatalf("CUDA_VISIBLE_DEVICES=%v does not match the indexes of %v (%v)", indexes, ids, idx)
		}
	}
	// Nomad allocated exactly those devices.
	var allocated []string
	for _, d := range a.AllocatedResources.Tasks["hello"].Devices {
		allocated = append(allocated, d.DeviceIDs...)
	}
	sort.Strings(allocated)
	if !slices.Equal(allocated, want) {
		t.Fatalf("Nomad allocated %v, lease holds %v", allocated, want)
	}

	eventually(t, 20*time.Second, "the lease of "+id+" to be released", func() (bool, error) {
		if jobLease(t, id) != nil {
			return false, nil
		}
		for _, g := range leased {
			if gpuLease(t, g) != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// (b) Two jobs that together need more GPUs than the node has run one after
// the other and never share a GPU.
func TestOversubscribedJobsRunInTurn(t *testing.T) {
	first, second := "e2e-turn-1", "e2e-turn-2"
	register(t, helloJob(t, first, 20, 6))
	time.Sleep(50 * time.Millisecond) // FIFO order by submit time
	register(t, helloJob(t, second, 20, 6))

	// Sample the leases while the two run: never both at once.
	stop := time.After(90 * time.Second)
	var order []string
	for len(order) < 2 {
		select {
		case <-stop:
			t.Fatalf("jobs did not both get a lease in time; got %v", order)
		case <-time.After(50 * time.Millisecond):
		}
		l1, l2 := jobLease(t, first), jobLease(t, second)
		if l1 != nil && l2 != nil {
			t.Fatalf("both jobs hold leases at once: %v and %v", l1.GPUs, l2.GPUs)
		}
		for _, l := range []struct {
			id string
			on bool
		}{{first, l1 != nil}, {second, l2 != nil}} {
			if l.on && !slices.Contains(order, l.id) {
				order = append(order, l.id)
			}
		}
	}
	if !slices.Equal(order, []string{first, second}) {
		t.Fatalf("granted in order %v, want FIFO %v", order, []string{first, second})
	}
	waitDead(t, first, 60*time.Second)
	waitDead(t, second, 90*time.Second)

	// Their task runs did not overlap in time.
	a1, a2 := onlyAlloc(t, first), onlyAlloc(t, second)
	end1 := a1.TaskStates["hello"].FinishedAt
	start2 := a2.TaskStates["hello"].StartedAt
	if !start2.After(end1) {
		t.Fatalf("%s started at %s before %s finished at %s", second, start2, first, end1)
	}
	for _, a := range []*nomadapi.Allocation{a1, a2} {
		if a.ClientStatus != "complete" {
			t.Fatalf("alloc %s of %s ended %s", a.ID, a.JobID, a.ClientStatus)
		}
	}
}

func onlyAlloc(t *testing.T, id string) *nomadapi.Allocation {
	t.Helper()
	as := allocs(t, id)
	if len(as) != 1 {
		t.Fatalf("%s has %d allocations, want 1", id, len(as))
	}
	a, _, err := env.nomad.Allocations().Info(as[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// (c) Malformed jobspecs, each submitted as a user does (`nomad job run` of
// a job file), are each rejected alone with an error naming the field
// (by the CLI, or as the job's status with the planner's reason), and a
// good job submitted among them runs; no rejected job is placed or leased.
func TestMalformedStanzaIsRejectedAlone(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(env.root, "examples", "jobs", "hello.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	const gpusLine = "gpus         = 2"
	cases := []struct {
		name string
		// from, to: the line of hello.nomad.hcl replaced (to may be
		// several lines, or empty).
		from, to string
		want     []string
	}{
		{"gpus-word", gpusLine, `gpus = "two"`, []string{"themis.gpus", `"two"`}},
		{"gpus-zero", gpusLine, `gpus = 0`, []string{"themis.gpus", "from 1 to"}},
		{"gpus-fraction", gpusLine, `gpus = 2.5`, []string{"themis.gpus", "2.5"}},
		{"gpus-missing", gpusLine, ``, []string{"themis.gpus", "required"}},
		{"gpus-typo", gpusLine, `gpu = 2`, []string{"themis.gpu", "unknown field"}},
		{"class", `class        = "be"`, `class = "urgent"`, []string{"themis.class", `"urgent"`}},
		{"grace-word", `grace_period = "30s"`, `grace_period = "soon"`, []string{"themis.grace_period", `"soon"`}},
		{"grace-negative", `grace_period = "30s"`, `grace_period = "-5s"`, []string{"themis.grace_period", "between"}},
		{"signal", `checkpoint_signal = "SIGTERM"`, `checkpoint_signal = "SIGFOO"`, []string{"themis.checkpoint_signal", "SIGFOO"}},
		{"priority", `vc           = "default"`, "vc = \"default\"\npriority = 5000", []string{"themis.priority", "5000"}},
		{"vc-name", `vc           = "default"`, `vc = "Vision Team"`, []string{"themis.vc", `"Vision Team"`}},
		{"iterations", gpusLine, "gpus = 2\niterations = -3", []string{"themis.iterations", "-3"}},
		{"model", gpusLine, "gpus = 2\nmodel = \"res net\"", []string{"themis.model", `"res net"`}},
		{"vc-number", `vc           = "default"`, `vc = 7`, []string{"themis.vc", "must be a string"}},
		{"two-stanzas", "themis {", "themis {\n  gpus = 1\n}\nthemis {", []string{"themis", "exactly one"}},
		// Refused by Nomad itself (the CLI's parser): it names the line
		// and column of the field, and the value.
		{"kill-timeout", `kill_timeout = "30s"`, `kill_timeout = "soon"`, []string{"e2e-bad-kill-timeout.nomad.hcl:", `invalid duration "soon"`}},
	}
	dir := t.TempDir()
	run := func(id, hcl string) (string, error) {
		hcl = strings.Replace(hcl, `job "hello"`, fmt.Sprintf("job %q", id), 1)
		file := filepath.Join(dir, id+".nomad.hcl")
		if err := os.WriteFile(file, []byte(hcl), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _, _ = env.nomad.Jobs().Deregister(id, true, nil) })
		cmd := exec.Command(env.nomadBin, "job", "run", "-detach", "-address", env.stack.NomadAddr(),
			"-var", "hello_bin="+env.helloBin, "-var", "steps=5", file)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	rejected := map[string][]string{} // by the planner: the fields to find in the status
	for _, c := range cases {
		hcl := string(src)
		if !strings.Contains(hcl, c.from) {
			t.Fatalf("%s: hello.nomad.hcl has no line %q", c.name, c.from)
		}
		hcl = strings.Replace(hcl, c.from, c.to, 1)
		id := "e2e-bad-" + c.name
		out, err := run(id, hcl)
		if err != nil {
			// Refused by the CLI or the server: the message names the field.
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s: nomad job run failed without naming %s:\n%s", c.name, w, out)
				}
			}
			t.Logf("%s: refused by nomad job run: %s", c.name, strings.Join(strings.Fields(out), " "))
			continue
		}
		rejected[id] = c.want
	}
	if out, err := run("e2e-good", string(src)); err != nil {
		t.Fatalf("the good job: %v\n%s", err, out)
	}
	for id, want := range rejected {
		eventually(t, 30*time.Second, id+" to be rejected", func() (bool, error) {
			st := jobStatus(t, id)
			return st != nil && st.State == "rejected", fmt.Errorf("status %+v", st)
		})
		st := jobStatus(t, id)
		for _, w := range append([]string{`task "hello"`}, want...) {
			if !strings.Contains(st.Reason, w) {
				t.Errorf("%s: rejection %q does not mention %s", id, st.Reason, w)
			}
		}
		t.Logf("%s: %s", id, st.Reason)
	}
	waitDead(t, "e2e-good", 60*time.Second)
	if a := onlyAlloc(t, "e2e-good"); a.ClientStatus != "complete" {
		t.Fatalf("e2e-good ended %s", a.ClientStatus)
	}
	for id := range rejected {
		if as := allocs(t, id); len(as) != 0 {
			t.Errorf("the rejected job %s was placed: %d allocations", id, len(as))
		}
		if l := jobLease(t, id); l != nil {
			t.Errorf("the rejected job %s holds a lease: %+v", id, l)
		}
	}
}
