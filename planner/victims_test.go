package planner

import (
	"context"
	"github.com/themis-nomad/themis/planner/plannertest"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

func TestCheckpointAge(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	l := lease.JobLease{GrantedAt: t0, GPUs: []string{"g0", "g1"}}
	started := []nomad.Alloc{{ClientStatus: "running", Created: t0, Started: t0.Add(time.Second)}}
	now := t0.Add(101 * time.Second)
	cases := []struct {
		name   string
		allocs []nomad.Alloc
		ckpt   lease.CheckpointRecord
		want   float64
	}{
		{"not started yet", []nomad.Alloc{{ClientStatus: "pending", Created: t0}}, lease.CheckpointRecord{}, 0},
		{"never checkpointed: at most this run", started, lease.CheckpointRecord{}, 100},
		{"checkpointed during this run", started, lease.CheckpointRecord{Time: t0.Add(71 * time.Second)}, 30},
		{"resumed from an older checkpoint", started, lease.CheckpointRecord{Time: t0.Add(-time.Hour)}, 100},
	}
	for _, tc := range cases {
		run, start := leaseRun(l, tc.allocs, now)
		if got := checkpointAge(run, start, tc.ckpt, now); got != tc.want {
			t.Errorf("%s: checkpointAge = %g, want %g", tc.name, got, tc.want)
		}
	}
}

// Live, preempt.victims=least-lost-work makes FitGpp preempt, among BE jobs
// that tie on Equation 2, the one whose newest checkpoint is freshest; by
// default it preempts the first in FIFO order.
func TestLeastLostWorkPicksTheFreshestCheckpointLive(t *testing.T) {
	for _, tc := range []struct {
		victims core.VictimOrder
		want    string
	}{{core.VictimsByPolicy, "be-a"}, {core.LeastLostWork, "be-b"}} {
		ctx := context.Background()
		clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
		fn, fs := plannertest.NewNomad(&clock, 8), plannertest.NewStore()
		policy, err := policies.NewFitGpp(core.Knobs{})
		if err != nil {
			t.Fatal(err)
		}
		st := stack.Of(policy)
		st.Victims = tc.victims
		p := New(Config{Nomad: fn, Store: fs, Stack: st, Now: func() time.Time { return clock }})
		fn.Submit("be-a", 4, "be", "30s")
		// be-b comes second in FIFO order by its submission, not by the
		// order of the two jobs' pins (concurrent: apply.go).
		clock = clock.Add(time.Millisecond)
		fn.Submit("be-b", 4, "be", "30s")
		for range 2 {
			if err := p.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(time.Second)
		}
		clock = clock.Add(10 * time.Minute)
		// be-a checkpointed 9 minutes ago, be-b a minute ago.
		for id, ago := range map[string]time.Duration{"be-a": 9 * time.Minute, "be-b": time.Minute} {
			k := core.JobKey{Namespace: "default", ID: id}
			fs.CheckpointRecords[k] = lease.CheckpointRecord{Namespace: "default", JobID: id, Name: "step-1", Time: clock.Add(-ago)}
		}
		fn.Submit("te", 2, "te", "10s")
		if err := p.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		var revoked []string
		for k, l := range fs.JobLeases {
			if l.Revoke != nil {
				revoked = append(revoked, k.ID)
			}
		}
		if len(revoked) != 1 || revoked[0] != tc.want {
			t.Errorf("victims %v: revoked %v, want [%s]", tc.victims, revoked, tc.want)
		}
	}
}
