package planner

import (
	"github.com/themis-nomad/themis/planner/plannertest"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/stack"
)

// Live, progress reports are untrusted unless the operator says otherwise
// (docs/themis.md, "Whose progress counts"): a job's core model is marked
// UntrustedProgress unless its namespace's binding says trust_progress =
// true, and a progress record stamped far ahead of the planner's clock is
// not used at all.
func TestProgressTrustedOnlyWhereBound(t *testing.T) {
	clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	trusting := vcsStack(t, "themis", "tenants.hcl", "namespace \"team-a\" {\n  trust_progress = true\n}\nnamespace \"team-b\" {}\n")
	for _, c := range []struct {
		name      string
		st        *stack.Stack
		ns        string
		untrusted bool
	}{
		{"no VC config: untrusted", mustStack(t, "themis", stack.Options{}), "default", true},
		{"bound with trust_progress", trusting, "team-a", false},
		{"bound without", trusting, "team-b", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fn := plannertest.NewNomad(&clock, 8)
			fn.SubmitAs(c.ns, "j", 1, "be", "default", 0)
			snap, err := fn.Snapshot(t.Context())
			if err != nil || len(snap.Jobs) != 1 {
				t.Fatal(err, snap)
			}
			p := New(Config{Nomad: fn, Store: plannertest.NewStore(), Stack: c.st, Now: func() time.Time { return clock }})
			cj := p.account(snap.Jobs[0], core.Queued, lease.JobRecord{}, nil, nil, lease.CheckpointRecord{}, clock)
			if cj.UntrustedProgress != c.untrusted {
				t.Errorf("UntrustedProgress = %v, want %v", cj.UntrustedProgress, c.untrusted)
			}
		})
	}
	k := core.JobKey{Namespace: "default", ID: "j"}
	report := func(at time.Time) map[core.JobKey]lease.ProgressRecord {
		return map[core.JobKey]lease.ProgressRecord{k: {Namespace: "default", JobID: "j", Iteration: 100, Total: 1000, Rate: 10, At: at}}
	}
	for _, c := range []struct {
		name string
		at   time.Time
		want float64
	}{
		{"now", clock, 90},
		{"a little ahead (clock skew)", clock.Add(30 * time.Second), 90},
		{"far in the future", clock.Add(time.Hour), -1},
	} {
		got := withProgress(core.Job{Key: k, Remaining: -1}, report(c.at), nil, nil, clock)
		if got.Remaining != c.want {
			t.Errorf("%s: remaining %v, want %v", c.name, got.Remaining, c.want)
		}
	}
}
