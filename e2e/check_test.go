package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/check"
)

// suiteWatcher is the invariant watcher (planner/check) that runs for the
// whole e2e run against the shared stack: TestMain fails the run if it saw
// any violation.
type suiteWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	w      *check.Watcher
	mu     sync.Mutex
	seen   []check.Violation
	passes int
	errs   int
}

func startSuiteWatcher() *suiteWatcher {
	ctx, cancel := context.WithCancel(env.ctx)
	sw := &suiteWatcher{cancel: cancel, done: make(chan struct{})}
	log := env.log.Named("check")
	w := &check.Watcher{
		Reader:     &check.Reader{Nomad: env.nomad, Consul: env.consul},
		Interval:   500 * time.Millisecond,
		Tolerances: check.DefaultTolerances,
		Report: func(v check.Violation) {
			log.Error("invariant violated", "violation", v.String())
			sw.mu.Lock()
			sw.seen = append(sw.seen, v)
			sw.mu.Unlock()
		},
	}
	sw.w = w
	go func() {
		defer close(sw.done)
		t := time.NewTicker(w.Interval)
		defer t.Stop()
		for {
			_, err := w.Pass(ctx)
			sw.mu.Lock()
			switch {
			case err != nil && ctx.Err() != nil:
				// Stopped mid-pass (a short run): not a failed read;
				// stop makes a last pass.
			case err != nil:
				sw.errs++
			default:
				sw.passes++
			}
			sw.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				log.Warn("snapshot failed", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return sw
}

// violations is how many violations the watcher has seen so far and how
// many snapshots it checked.
func (sw *suiteWatcher) violations() (seen, passes int) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return len(sw.seen), sw.passes
}

// stop ends the watcher after a last pass over what the run left, and
// returns what it saw.
func (sw *suiteWatcher) stop() (vs []check.Violation, passes, errs int) {
	sw.cancel()
	<-sw.done
	ctx, cancel := context.WithTimeout(env.ctx, 15*time.Second)
	defer cancel()
	_, err := sw.w.Pass(ctx)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if err != nil {
		sw.errs++
		fmt.Fprintln(os.Stderr, "e2e: invariant watcher: last pass:", err)
	} else {
		sw.passes++
	}
	return sw.seen, sw.passes, sw.errs
}

// finishSuiteWatcher stops the suite's watcher and says whether the run
// must fail.
func finishSuiteWatcher(sw *suiteWatcher) (failed bool) {
	vs, passes, errs := sw.stop()
	fmt.Fprintf(os.Stderr, "e2e: invariant watcher: %d snapshots checked (%d failed reads), %d violations\n", passes, errs, len(vs))
	for _, v := range vs {
		fmt.Fprintln(os.Stderr, "e2e: invariant violated:", v)
	}
	return len(vs) > 0 || passes == 0
}

// The watcher against the real agents while the planner runs a preemption:
// it reads the victim's revoke and each running task's GPUs and leases
// (so it checks something), and `themis check`, running the whole time,
// reports nothing; `themis check -once` exits 0.
func TestCheckSeesNoViolationWhileJobsRunAndArePreempted(t *testing.T) {
	usePolicy(t, "fitgpp")
	cmd := exec.Command(env.themis, "check", "-json", "-interval", "300ms",
		"-nomad-addr", env.stack.NomadAddr(), "-consul-addr", env.stack.ConsulAddr())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	r := &check.Reader{Nomad: env.nomad, Consul: env.consul}
	be, te := "e2e-check-be", "e2e-check-te"
	first := revokingScene(t, be, te)
	took := time.Now()
	s, err := r.Snapshot(env.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one snapshot (%d jobs, %d allocations, %d job leases): %s", len(s.Jobs), len(s.Allocs), len(s.JobLeases), time.Since(took).Round(time.Microsecond))
	if !slices.ContainsFunc(s.Revokes, func(rv check.SeenRevoke) bool { return rv.Job.ID == be }) {
		t.Fatalf("the watcher's snapshot has no revoke of %s: %+v", be, s.Revokes)
	}
	if vs := check.Check(s, check.DefaultTolerances); len(vs) != 0 {
		t.Fatalf("violations while %s is revoked: %v", be, vs)
	}
	// The victim still runs, on the GPUs its lease holds, as the
	// watcher reads them.
	var gpus []string
	for _, a := range s.Allocs {
		if a.ID == first.ID {
			for _, task := range a.Tasks {
				gpus = append(gpus, task.GPUs...)
			}
		}
	}
	if l := jobLease(t, be); l == nil || len(gpus) != 8 || !sameSet(gpus, l.GPUs) {
		t.Fatalf("the watcher reads GPUs %v for %s's allocation, its lease is %+v", gpus, be, l)
	}
	waitLeaseOf(t, te, 30*time.Second)
	waitDead(t, te, 60*time.Second)
	eventually(t, 60*time.Second, be+" to run again", func() (bool, error) {
		for _, a := range allocs(t, be) {
			if a.ID != first.ID && a.ClientStatus == "running" {
				return true, nil
			}
		}
		return false, nil
	})
	out, err := exec.Command(env.themis, "check", "-once",
		"-nomad-addr", env.stack.NomadAddr(), "-consul-addr", env.stack.ConsulAddr()).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: ") {
		t.Fatalf("themis check -once: %v\n%s", err, out)
	}
	t.Logf("themis check -once: %s", strings.TrimSpace(string(out)))
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	if stdout.Len() != 0 {
		t.Fatalf("themis check reported violations:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// The watcher can fail: in a Consul of its own (the suite's planner would
// release leases of jobs Nomad does not know) with the real key layout, a
// second job lease and GPU key for a GPU another lease holds is reported
// as a double lease, and `themis check -once` exits 1. With the same Consul,
// a themis task the suite's planner runs (leased in the suite's Consul, not
// in this one) is reported as running on GPUs it holds no lease for, and a
// job pinned under a lease that Nomad cannot place is reported lost; as one
// part of a two-node gang lease written here, the task is a gang partly
// running.
func TestCheckReportsViolations(t *testing.T) {
	c, consulAddr := consulOfItsOwn(t)
	granted := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	put := func(key, value string) {
		t.Helper()
		if _, err := c.KV().Put(&consulapi.KVPair{Key: key, Value: []byte(value)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	put("themis/leases/jobs/default/e2e-fake-a", `{"lease_id":"LA","namespace":"default","job_id":"e2e-fake-a","node_id":"n","node_name":"dev-node","gpus":["SIM-dev-node-0","SIM-dev-node-1"],"granted_at":"`+granted+`"}`)
	put("themis/leases/gpus/SIM-dev-node-0", `{"lease_id":"LA","namespace":"default","job_id":"e2e-fake-a","node_id":"n","node_name":"dev-node","gpu":"SIM-dev-node-0","granted_at":"`+granted+`"}`)
	put("themis/leases/gpus/SIM-dev-node-1", `{"lease_id":"LA","namespace":"default","job_id":"e2e-fake-a","node_id":"n","node_name":"dev-node","gpu":"SIM-dev-node-1","granted_at":"`+granted+`"}`)
	run := func(flags ...string) ([]check.Violation, int) {
		t.Helper()
		args := append([]string{"check", "-once", "-json", "-nomad-addr", env.stack.NomadAddr(), "-consul-addr", consulAddr}, flags...)
		cmd := exec.Command(env.themis, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var vs []check.Violation
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var v check.Violation
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("themis check -json printed %q: %v (stderr %s)", sc.Text(), err, stderr.String())
			}
			vs = append(vs, v)
		}
		return vs, code
	}
	if vs, code := run(); code != 0 || len(vs) != 0 {
		t.Fatalf("one consistent lease: exit %d, violations %v", code, vs)
	}

	// A second job's lease of GPU 1 and 2, with its GPU key for GPU 2.
	put("themis/leases/jobs/default/e2e-fake-b", `{"lease_id":"LB","namespace":"default","job_id":"e2e-fake-b","node_id":"n","node_name":"dev-node","gpus":["SIM-dev-node-1","SIM-dev-node-2"],"granted_at":"`+granted+`"}`)
	put("themis/leases/gpus/SIM-dev-node-2", `{"lease_id":"LB","namespace":"default","job_id":"e2e-fake-b","node_id":"n","node_name":"dev-node","gpu":"SIM-dev-node-2","granted_at":"`+granted+`"}`)
	vs, code := run()
	if code != 1 || !slices.ContainsFunc(vs, func(v check.Violation) bool {
		return v.Kind == check.DoubleLease && v.GPU == "SIM-dev-node-1" && strings.Contains(v.Message, "e2e-fake-a") && strings.Contains(v.Message, "e2e-fake-b")
	}) {
		t.Fatalf("a GPU in two job leases: exit %d, violations %+v; want exit 1 and a double lease of SIM-dev-node-1", code, vs)
	}
	t.Logf("reported: %v", vs)

	// A themis task of the suite's planner, seen with this Consul.
	const id = "e2e-check-unleased"
	trainJob{gpus: 2, steps: 3000}.run(t, id)
	waitRunning(t, id, 60*time.Second)
	leased := jobLease(t, id).GPUs
	vs, code = run()
	var unleased []string
	for _, v := range vs {
		if v.Kind == check.UnleasedGPU && v.Job == "default/"+id {
			unleased = append(unleased, v.GPU)
		}
	}
	if code != 1 || !sameSet(unleased, leased) {
		t.Fatalf("a task whose GPUs this Consul does not lease: exit %d, violations %+v; want unleased-gpu for %v", code, vs, leased)
	}
	t.Logf("reported: %v", vs)

	// The same task as one part of a two-node gang lease in this Consul:
	// its one allocation runs without the other part's.
	a := onlyRunningOrDone(t, id)
	granted = time.Now().UTC().Format(time.RFC3339Nano)
	gpus, _ := json.Marshal(append(slices.Clone(leased), "SIM-node-x-0", "SIM-node-x-1"))
	part0, _ := json.Marshal(leased)
	put("themis/leases/jobs/default/"+id, `{"lease_id":"LG","namespace":"default","job_id":"`+id+`","node_id":"`+a.NodeID+`","node_name":"dev-node","gpus":`+string(gpus)+
		`,"granted_at":"`+granted+`","parts":[{"node_id":"`+a.NodeID+`","node_name":"dev-node","gpus":`+string(part0)+
		`},{"node_id":"x","node_name":"node-x","gpus":["SIM-node-x-0","SIM-node-x-1"]}]}`)
	time.Sleep(1100 * time.Millisecond)
	vs, code = run("-gang-tolerance", "1s")
	if code != 1 || !slices.ContainsFunc(vs, func(v check.Violation) bool { return v.Kind == check.PartialGang && v.Job == "default/"+id }) {
		t.Fatalf("one part of a two-part gang running, with -gang-tolerance 1s: exit %d, violations %+v; want partial-gang of %s", code, vs, id)
	}
	for _, v := range vs {
		if v.Kind == check.PartialGang {
			t.Logf("reported: %v", v)
		}
	}

	// A job pinned under a lease (its meta says so) that Nomad can never
	// place: neither queued, running nor finished. (Its task is not of
	// the themis driver, so the suite's planner leaves it alone.)
	const lost = "e2e-check-lost"
	job := nomadapi.NewBatchJob(lost, lost, "global", 50)
	pool := "default"
	job.NodePool = &pool
	job.Meta = map[string]string{"themis.lease_id": "e2e-fake-lease"}
	job.Constrain(nomadapi.NewConstraint("${node.unique.name}", "=", "no-such-node"))
	task := nomadapi.NewTask("t", "raw_exec").SetConfig("command", "/bin/true")
	job.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(task))
	register(t, job)
	time.Sleep(1500 * time.Millisecond)
	vs, code = run("-lost-tolerance", "1s")
	if code != 1 || !slices.ContainsFunc(vs, func(v check.Violation) bool { return v.Kind == check.LostJob && v.Job == "default/"+lost }) {
		t.Fatalf("a pinned job Nomad cannot place, with -lost-tolerance 1s: exit %d, violations %+v; want lost-job of %s", code, vs, lost)
	}
	for _, v := range vs {
		if v.Kind == check.LostJob {
			t.Logf("reported: %v", v)
		}
	}
}

// consulOfItsOwn is privateConsul with its address, for the themis binary.
func consulOfItsOwn(t *testing.T) (*consulapi.Client, string) {
	t.Helper()
	agents, err := agentsDir(env.root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := devstack.StartConsul(context.Background(), devstack.Config{
		ConsulBin: filepath.Join(agents, "consul"), Templates: filepath.Join(env.root, "examples", "agents"),
		DataDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	cfg := consulapi.DefaultConfig()
	cfg.Address = st.ConsulAddr()
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, st.ConsulAddr()
}

// The grace check on a real kill: a workload that ignores its checkpoint
// signal is killed at its deadline. The watcher reads the kill from
// Nomad's task events (a SIGKILL termination after the Killing event) and
// finds the grace period kept; had the deadline been 10 s later, the same
// allocation would be a grace-cut violation naming Nomad's kill timeout.
func TestCheckGraceOnARealKill(t *testing.T) {
	usePolicy(t, "fitgpp")
	be, te := "e2e-check-deaf-be", "e2e-check-deaf-te"
	trainJob{gpus: 8, grace: "3s", shell: ignoresSignals}.run(t, be)
	first := waitRunning(t, be, 60*time.Second)
	trainJob{gpus: 2, class: "te", steps: 20}.run(t, te)
	w := &check.Watcher{Reader: &check.Reader{Nomad: env.nomad, Consul: env.consul}, Tolerances: check.DefaultTolerances}
	var revoked *check.SeenRevoke
	eventually(t, 40*time.Second, te+" to be granted", func() (bool, error) {
		vs, err := w.Pass(env.ctx)
		if err != nil {
			return false, err
		}
		if len(vs) != 0 {
			t.Fatalf("violations: %v", vs)
		}
		if l := jobLease(t, be); l != nil && l.Revoke != nil && revoked == nil {
			revoked = &check.SeenRevoke{Job: check.Ref{Namespace: "default", ID: be}, LeaseID: l.LeaseID, GrantedAt: l.GrantedAt,
				Revoke: check.Revoke{Reason: l.Revoke.Reason, Since: l.Revoke.Since, Deadline: l.Revoke.Deadline}}
		}
		return jobLease(t, te) != nil, nil
	})
	if revoked == nil {
		t.Fatal("the victim's lease was never seen revoking")
	}
	s, err := w.Reader.Snapshot(env.ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Revokes = []check.SeenRevoke{*revoked}
	if vs := check.Check(s, check.DefaultTolerances); len(vs) != 0 {
		t.Fatalf("a victim killed at its deadline: %v", vs)
	}
	later := *revoked
	later.Revoke.Deadline = later.Revoke.Deadline.Add(10 * time.Second)
	s.Revokes = []check.SeenRevoke{later}
	vs := check.Check(s, check.DefaultTolerances)
	if len(vs) != 1 || vs[0].Kind != check.GraceCut || vs[0].Alloc != first.ID || !strings.Contains(vs[0].Message, "kill timeout of 3s") {
		t.Fatalf("the same kill 10 s before a later deadline: %v; want one grace-cut of allocation %s with Nomad's 3s kill timeout", vs, first.ID)
	}
	t.Logf("reported: %v", vs[0])
}
