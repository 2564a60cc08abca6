package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// The suite runs one planner in this process, as the leader (without the
// lock: nothing else leads), serving the HTTP API at env.apiURL. Tests that need another policy swap it for the
// length of the test; a test that kills a planner stops this one, runs the
// themis binary, and starts this one again afterwards.

type plannerSetup struct {
	policy         core.Policy
	stack          *stack.Stack // instead of policy: a whole stack (virtual clusters)
	maxKillTimeout time.Duration
}

type runningPlanner struct {
	cancel context.CancelFunc
	done   chan error
}

func startPlanner(s plannerSetup) {
	ctx, cancel := context.WithCancel(env.ctx)
	st := s.stack
	if st == nil {
		st = stack.Of(s.policy)
	}
	nc := nomad.NewClient(env.nomad, "", env.log.Named("nomad"))
	// raw_exec jobs keep checkpoints under the dev stack's raw_exec root
	// (their users make their dirs); exec jobs in their own job's dir,
	// which the device plugin mounts.
	nc.SetForeignCheckpoints(nomad.ForeignCheckpoints{Root: devstack.RawExecCheckpoints(filepath.Join(env.work, "stack"))})
	p := planner.New(planner.Config{
		Nomad:          nc,
		Store:          consul.NewStore(env.consul),
		Stack:          st,
		Resync:         5 * time.Second,
		MaxKillTimeout: s.maxKillTimeout,
		RestoreGuard:   5 * time.Second,
		Log:            env.log.Named("planner").With("policy", st.Policy.Name()),
		OnRound:        env.api.Publish,
	})
	env.api.SetLeading(true)
	rp := &runningPlanner{cancel: cancel, done: make(chan error, 1)}
	go func() { rp.done <- p.Run(ctx) }()
	env.planner = rp
}

// stopPlanner stops the suite's planner and returns what its loop returned.
func stopPlanner() error {
	if env.planner == nil {
		return nil
	}
	env.planner.cancel()
	err := <-env.planner.done
	env.planner = nil
	env.api.SetLeading(false)
	return err
}

// useStack runs the suite's planner with a whole stack (e.g. with virtual
// clusters) for the rest of the test.
func useStack(t testing.TB, st *stack.Stack) {
	t.Helper()
	if err := st.Live(); err != nil {
		t.Fatal(err)
	}
	if err := stopPlanner(); err != nil {
		t.Fatalf("stop planner: %v", err)
	}
	startPlanner(plannerSetup{stack: st, maxKillTimeout: 30 * time.Minute})
	t.Cleanup(func() {
		if err := stopPlanner(); err != nil {
			t.Errorf("stop planner: %v", err)
		}
		startPlanner(plannerSetup{policy: policies.FIFO{}})
	})
}

// usePolicy runs the suite's planner with a policy (built by name and knobs
// as `themis planner -policy` builds it) for the rest of the test.
func usePolicy(t testing.TB, name string, settings ...string) {
	t.Helper()
	useStack(t, stack.Of(mustPolicy(t, name, settings...)))
}

// mustPolicy builds a policy by name and knobs.
func mustPolicy(t testing.TB, name string, settings ...string) core.Policy {
	t.Helper()
	st := mustStack(t, name, stack.Options{Knobs: mustKnobs(t, settings...)})
	if err := st.Live(); err != nil {
		t.Fatal(err)
	}
	return st.Policy
}

// mustStack is stack.Build, failing the test or benchmark on error.
func mustStack(tb testing.TB, policy string, opts stack.Options) *stack.Stack {
	tb.Helper()
	st, err := stack.Build(policy, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// mustKnobs parses knob settings ("themis.lease=15s"), failing the test on
// error.
func mustKnobs(t testing.TB, settings ...string) core.Knobs {
	t.Helper()
	k, err := core.ParseKnobs(settings)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startPlannerProcess runs `themis planner` with the given id and flags
// against the suite's agents (resyncing every 5 s), its output in a log
// file of the test's temp dir; it is killed when the test ends.
func startPlannerProcess(t *testing.T, id string, flags ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"planner", "-nomad-addr", env.stack.NomadAddr(), "-consul-addr", env.stack.ConsulAddr(),
		"-resync", "5s", "-id", id}, flags...)
	cmd := exec.Command(env.themis, args...)
	logf, err := os.Create(filepath.Join(t.TempDir(), id+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}
