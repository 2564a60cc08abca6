package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// slow skips a test that takes more than about a minute unless
// THEMIS_E2E_SLOW=1 (make test-slow).
func slow(t *testing.T) {
	t.Helper()
	if os.Getenv("THEMIS_E2E_SLOW") != "1" {
		t.Skip("slow test (minutes): set THEMIS_E2E_SLOW=1 or run make test-slow")
	}
}

// A crash point: the planner's process dies right after one of its writes
// succeeded. The four steps of docs/design.md's grant and revoke paths.
const (
	afterLease   = "grant: after the lease write, before the pin"
	afterPin     = "grant: after the pin"
	afterMark    = "revoke: after the revoke mark, before the suspend"
	afterSuspend = "revoke: after the suspend, before the release"
)

var errCrashed = errors.New("planner crashed (fault injected)")

// crash kills an in-process planner at a point: once the chosen write for
// the chosen job (any job when empty) has succeeded, the planner's context
// is cancelled and every later write fails without reaching Consul or
// Nomad, as if the process had died between the two writes.
type crash struct {
	point, job string
	cancel     context.CancelFunc
	mu         sync.Mutex
	at         time.Time // when it fired; zero until then
}

func (c *crash) dead() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() {
		return errCrashed
	}
	return nil
}

func (c *crash) after(point, job string, err error) error {
	if err != nil || point != c.point || (c.job != "" && job != c.job) {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		c.at = time.Now()
		c.cancel()
	}
	return nil
}

func (c *crash) firedAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

type crashStore struct {
	planner.Store
	c *crash
}

func (s crashStore) Grant(ctx context.Context, l lease.JobLease) error {
	if err := s.c.dead(); err != nil {
		return err
	}
	return s.c.after(afterLease, l.JobID, s.Store.Grant(ctx, l))
}

func (s crashStore) Revoke(ctx context.Context, l lease.JobLease, r lease.Revoke) (lease.JobLease, error) {
	if err := s.c.dead(); err != nil {
		return l, err
	}
	out, err := s.Store.Revoke(ctx, l, r)
	return out, s.c.after(afterMark, l.JobID, err)
}

func (s crashStore) Release(ctx context.Context, l lease.JobLease, rec *lease.JobRecord) error {
	if err := s.c.dead(); err != nil {
		return err
	}
	return s.Store.Release(ctx, l, rec)
}

func (s crashStore) PutRecord(ctx context.Context, r lease.JobRecord) (lease.JobRecord, error) {
	if err := s.c.dead(); err != nil {
		return r, err
	}
	return s.Store.PutRecord(ctx, r)
}

func (s crashStore) WriteStatuses(ctx context.Context, puts []lease.JobStatus, dels []core.JobKey) (int, error) {
	if err := s.c.dead(); err != nil {
		return 0, err
	}
	return s.Store.WriteStatuses(ctx, puts, dels)
}

type crashNomad struct {
	planner.Cluster
	c *crash
}

func (n crashNomad) Pin(ctx context.Context, j *nomad.Job, l lease.JobLease, pool string, restarts int) error {
	if err := n.c.dead(); err != nil {
		return err
	}
	return n.c.after(afterPin, j.Key.ID, n.Cluster.Pin(ctx, j, l, pool, restarts))
}

func (n crashNomad) Suspend(ctx context.Context, j *nomad.Job, leaseID string) error {
	if err := n.c.dead(); err != nil {
		return err
	}
	return n.c.after(afterSuspend, j.Key.ID, n.Cluster.Suspend(ctx, j, leaseID))
}

func (n crashNomad) Adopt(ctx context.Context, j *nomad.Job) error {
	if err := n.c.dead(); err != nil {
		return err
	}
	return n.Cluster.Adopt(ctx, j)
}

// startFaultPlanner runs a fitgpp planner on the cluster, crashing at c
// when c is not nil; stop cancels it and returns what Run returned.
func (m *multiCluster) startFaultPlanner(t *testing.T, ctx context.Context, name string, c *crash) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var nc planner.Cluster = nomad.NewClient(m.nomad, "", env.log.Named(name+"-nomad"))
	var st planner.Store = consul.NewStore(m.consul)
	if c != nil {
		c.cancel = cancel
		nc, st = crashNomad{nc, c}, crashStore{st, c}
	}
	p := planner.New(planner.Config{
		Nomad: nc, Store: st, Stack: stack.Of(mustPolicy(t, "fitgpp")), Resync: 5 * time.Second,
		MaxKillTimeout: 30 * time.Minute, RestoreGuard: 5 * time.Second, Log: env.log.Named(name),
	})
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// finished: the job is dead in Nomad with a complete allocation and none
// running or pending, and its lease is released.
func (m *multiCluster) finished(id string) (bool, error) {
	j, _, err := m.nomad.Jobs().Info(id, nil)
	if err != nil {
		return false, err
	}
	if j.Status == nil || !finishedInNomad(j) {
		return false, fmt.Errorf("%s is %v (meta %v)", id, *j.Status, j.Meta)
	}
	as, _, err := m.nomad.Jobs().Allocations(id, true, nil)
	if err != nil {
		return false, err
	}
	complete := false
	for _, a := range as {
		switch a.ClientStatus {
		case "complete":
			complete = true
		case "running", "pending":
			return false, fmt.Errorf("%s has a %s allocation", id, a.ClientStatus)
		}
	}
	if !complete {
		return false, fmt.Errorf("%s has no complete allocation", id)
	}
	p, _, err := m.consul.KV().Get(lease.JobKey("default", id), nil)
	if err != nil || p != nil {
		return false, fmt.Errorf("%s still has a lease (%v)", id, err)
	}
	return true, nil
}

// waitFinished waits for every job to finish and returns those that did not.
func (m *multiCluster) waitFinished(ids []string, timeout time.Duration) (lost []string) {
	deadline := time.Now().Add(timeout)
	for _, id := range ids {
		for {
			ok, _ := m.finished(id)
			if ok {
				break
			}
			if time.Now().After(deadline) {
				lost = append(lost, id)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return lost
}

type faultRow struct {
	fault, step string
	violations  int
	lost        []string
	recovery    time.Duration
	note        string
}

func faultTable(rows []faultRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | step | violations | jobs lost | recovery |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		lost := "0"
		if len(r.lost) > 0 {
			lost = fmt.Sprintf("%d (%s)", len(r.lost), strings.Join(r.lost, ", "))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s%s |\n", r.fault, r.step, r.violations, lost,
			r.recovery.Round(10*time.Millisecond), r.note)
	}
	return b.String()
}

// Faults at each step, on the 3-client dev cluster under the invariant
// watcher, with a fitgpp planner: the leading planner killed right after
// each write of a grant (lease, pin) and of a revoke (mark, suspend), a
// fresh planner started at once; and the Nomad server restarted with its
// data dir while a job runs. For each: no violation, every job finishes,
// and the time until the cluster makes progress again (the job the dead
// planner was granting, or the job a revoke was for, runs; after the
// server restart, a job submitted once it is up runs). Goal: 10 s.
// Logs the table docs/invariants.md shows.
func TestFaultAtEachStep(t *testing.T) {
	slow(t)
	ctx, cancel := context.WithTimeout(env.ctx, 15*time.Minute)
	defer cancel()
	m := startMultiCluster(t, ctx)
	violations := watching(t, ctx, m.nomad, m.consul)
	var rows []faultRow
	submit := func(id string, o trainJob) {
		t.Helper()
		if _, _, err := m.nomad.Jobs().Register(o.build(t, id), nil); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
		t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister(id, true, nil) })
	}
	waitRuns := func(id string, timeout time.Duration) time.Time {
		t.Helper()
		eventually(t, timeout, id+" to run", func() (bool, error) {
			a, _, err := m.running(id)
			return a != nil, err
		})
		return time.Now()
	}
	killAt := func(point string, c *crash) time.Time {
		t.Helper()
		eventually(t, 60*time.Second, "the planner to crash "+point, func() (bool, error) { return !c.firedAt().IsZero(), nil })
		return c.firedAt()
	}

	// The planner killed after each write of a grant: the granted job
	// runs, under the next planner, on the GPUs of the first lease.
	for i, point := range []string{afterLease, afterPin} {
		before := violations()
		id := fmt.Sprintf("step-grant-%d", i)
		c := &crash{point: point, job: id}
		stopDoomed := m.startFaultPlanner(t, ctx, "doomed", c)
		submit(id, trainJob{gpus: 2, steps: 30})
		at := killAt(point, c)
		if err := stopDoomed(); err != nil {
			t.Errorf("the crashed planner's Run: %v", err)
		}
		first := m.lease(t, id)
		stop := m.startFaultPlanner(t, ctx, "next", nil)
		ran := waitRuns(id, 60*time.Second)
		if l := m.lease(t, id); first == nil || l == nil || l.LeaseID != first.LeaseID {
			t.Errorf("%s: lease at the crash %+v, lease when it runs %+v; want the same lease", point, first, l)
		}
		lost := m.waitFinished([]string{id}, 60*time.Second)
		if err := stop(); err != nil {
			t.Errorf("planner: %v", err)
		}
		rows = append(rows, faultRow{fault: "planner killed", step: point, violations: violations() - before,
			lost: lost, recovery: ran.Sub(at)})
		t.Logf("%s: %s runs %s after the crash", point, id, ran.Sub(at).Round(time.Millisecond))
	}

	// The planner killed after each write of a revoke: three 8-GPU
	// best-effort jobs fill the cluster, a TE job arrives, fitgpp revokes
	// one of them; the next planner finishes the revoke, the TE job runs,
	// and the victim resumes and finishes.
	for i, point := range []string{afterMark, afterSuspend} {
		before := violations()
		stopFirst := m.startFaultPlanner(t, ctx, "filler", nil)
		var ids []string
		for k := range 3 {
			id := fmt.Sprintf("step-revoke-%d-be%d", i, k)
			submit(id, trainJob{gpus: 8, grace: "10s", steps: 150})
			ids = append(ids, id)
		}
		for _, id := range ids {
			waitRuns(id, 90*time.Second)
		}
		if err := stopFirst(); err != nil {
			t.Errorf("planner: %v", err)
		}
		te := fmt.Sprintf("step-revoke-%d-te", i)
		c := &crash{point: point}
		stopDoomed := m.startFaultPlanner(t, ctx, "doomed", c)
		submit(te, trainJob{gpus: 2, class: "te", steps: 30})
		at := killAt(point, c)
		if err := stopDoomed(); err != nil {
			t.Errorf("the crashed planner's Run: %v", err)
		}
		stop := m.startFaultPlanner(t, ctx, "next", nil)
		ran := waitRuns(te, 60*time.Second)
		lost := m.waitFinished(append(ids, te), 120*time.Second)
		if err := stop(); err != nil {
			t.Errorf("planner: %v", err)
		}
		rows = append(rows, faultRow{fault: "planner killed", step: point, violations: violations() - before,
			lost: lost, recovery: ran.Sub(at)})
		t.Logf("%s: %s runs %s after the crash", point, te, ran.Sub(at).Round(time.Millisecond))
	}

	// The Nomad server restarted with its data dir while a job runs; the
	// planner keeps running (its rounds fail meanwhile) and resumes.
	{
		before := violations()
		stop := m.startFaultPlanner(t, ctx, "planner", nil)
		submit("step-server-a", trainJob{gpus: 8, steps: 150})
		waitRuns("step-server-a", 60*time.Second)
		if err := m.cluster.StopServer(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		started := time.Now()
		if err := m.cluster.StartServer(ctx); err != nil {
			t.Fatal(err)
		}
		up := time.Since(started)
		submit("step-server-b", trainJob{gpus: 2, steps: 30})
		eventually(t, 60*time.Second, "step-server-b to be granted", func() (bool, error) { return m.lease(t, "step-server-b") != nil, nil })
		granted := time.Since(started)
		ran := waitRuns("step-server-b", 60*time.Second)
		// Where the time after the grant goes: Nomad placing the pinned
		// job (the allocation's creation) or the client starting it.
		if a, _, err := m.running("step-server-b"); err == nil && a != nil {
			if st := a.TaskStates["hello"]; st != nil {
				t.Logf("server restart: step-server-b's allocation created %s and its task started %s after the server was started",
					time.Unix(0, a.CreateTime).Sub(started).Round(time.Millisecond), st.StartedAt.Sub(started).Round(time.Millisecond))
			}
		}
		lost := m.waitFinished([]string{"step-server-a", "step-server-b"}, 90*time.Second)
		if err := stop(); err != nil {
			t.Errorf("planner: %v", err)
		}
		if as := allocsOf(t, m.nomad, "step-server-a"); len(as) != 1 {
			t.Errorf("step-server-a has %d allocations after the server restart, want its one", len(as))
		}
		rows = append(rows, faultRow{fault: "Nomad server restarted", step: "a job running, the server down 2 s", violations: violations() - before,
			lost: lost, recovery: ran.Sub(started),
			note: fmt.Sprintf(" (server and nodes ready after %s, the job granted after %s)", up.Round(10*time.Millisecond), granted.Round(10*time.Millisecond))})
		t.Logf("server restart: ready %s after it was started; a job submitted then is granted %s and runs %s after it was started",
			up.Round(time.Millisecond), granted.Round(time.Millisecond), ran.Sub(started).Round(time.Millisecond))
	}

	t.Logf("fault x step -> violations, jobs lost, recovery (time from the crash, or the server's start, until the job waiting on it runs):\n%s", faultTable(rows))
	for _, r := range rows {
		if r.violations > 0 || len(r.lost) > 0 {
			t.Errorf("%s / %s: %d violations, jobs lost %v", r.fault, r.step, r.violations, r.lost)
		}
		if r.recovery > 10*time.Second {
			t.Logf("NOTE: %s / %s: recovery %s, over the 10 s goal", r.fault, r.step, r.recovery.Round(time.Millisecond))
		}
	}
}
