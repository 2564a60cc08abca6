package planner

import (
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/plannertest"
	"github.com/themis-nomad/themis/planner/stack"
)

// The planner's tests run it against plannertest's in-memory Nomad and
// Consul (check-and-set, crash budgets, the invariant check after every
// round); the e2e suite checks the same paths against real agents.

var (
	_ Cluster = (*plannertest.Nomad)(nil)
	_ Store   = (*plannertest.Store)(nil)
)

// harness is plannertest's harness driving a Planner, with the Config a
// test may change before a Restart.
type harness struct {
	*plannertest.Harness[*Planner]
	config Config
}

// newHarness builds a one-node cluster of gpus GPUs planned by st.
func newHarness(t *testing.T, gpus int, st *stack.Stack) *harness {
	return newClusterHarness(t, 1, gpus, st)
}

// newClusterHarness is newHarness on a cluster of nodes nodes.
func newClusterHarness(t *testing.T, nodes, gpus int, st *stack.Stack) *harness {
	h := &harness{}
	h.Harness = plannertest.NewHarness(t, nodes, gpus, func(ph *plannertest.Harness[*Planner]) *Planner {
		if h.config.Stack == nil {
			h.config = Config{Nomad: ph.Nomad, Store: ph.Store, Stack: st, Now: func() time.Time { return ph.Clock }}
		}
		return New(h.config)
	})
	return h
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

// vcsStack is a policy's stack with the virtual clusters of the HCL
// config src (named name in errors).
func vcsStack(tb testing.TB, policy, name, src string) *stack.Stack {
	tb.Helper()
	vcs, err := hived.ParseConfig(name, []byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	return mustStack(tb, policy, stack.Options{VCs: vcs})
}

func ptr[T any](v T) *T { return &v }
