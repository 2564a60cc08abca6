package planner

import (
	"context"
	"fmt"
	"github.com/themis-nomad/themis/planner/plannertest"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/stack"
)

// BenchmarkRoundQueued1000 is one live planner round (observe, decide, act,
// statuses) with 1,000 queued jobs waiting behind 64 running 2-GPU jobs on 16
// nodes of 8 GPUs, over the adapters' data shapes (parsed Nomad jobs,
// allocations, leases and job records) held in memory, so it measures the
// planner's own work per round, not Nomad's or Consul's latency:
//
//	go test ./planner -run '^$' -bench RoundQueued1000
func BenchmarkRoundQueued1000(b *testing.B) {
	for _, name := range []string{"fifo", "fitgpp", "tiresias-las"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
			fn, fs := plannertest.NewCluster(&clock, 16, 8), plannertest.NewStore()
			policy := mustStack(b, name, stack.Options{}).Policy
			p := New(Config{Nomad: fn, Store: fs, Stack: stack.Of(policy), Now: func() time.Time { return clock }, DecideEveryRound: true})
			for i := range 64 {
				fn.Submit(fmt.Sprintf("run-%03d", i), 2, "be", "30s")
			}
			// Grant the running jobs (fitgpp grants one per round in FIFO
			// order at most per node: rounds until nothing changes).
			for range 8 {
				if err := p.Reconcile(ctx); err != nil {
					b.Fatal(err)
				}
				clock = clock.Add(time.Minute)
			}
			for i := range 1000 {
				class := "be"
				if i%10 == 0 {
					class = "te" // some TE jobs, which FitGpp ranks first
				}
				fn.Submit(fmt.Sprintf("queued-%04d", i), 1+i%8, class, "30s")
			}
			if err := p.Reconcile(ctx); err != nil {
				b.Fatal(err)
			}
			snap, err := fn.Snapshot(ctx)
			if err != nil {
				b.Fatal(err)
			}
			fn.Cached = snap
			running := 0
			for _, as := range snap.Allocs {
				for _, a := range as {
					if !a.Terminal() {
						running++
					}
				}
			}
			timeRounds(b, p, &clock)
			b.ReportMetric(float64(len(snap.Jobs)), "jobs")
			b.ReportMetric(float64(running), "running")
		})
	}
}

const fourTeams = `
vc "a" {
  cells {
    type  = "node8"
    count = 1
  }
  namespace "*" {}
}
vc "b" {
  cells {
    type  = "node8"
    count = 1
  }
  namespace "*" {}
}
vc "c" {
  cells {
    type  = "socket4"
    count = 1
  }
  namespace "*" {}
}
vc "d" {
  cells {
    type  = "socket4"
    count = 1
  }
  namespace "*" {}
}
`

// BenchmarkRoundVCs200 is one live round with HiveD virtual clusters: 3
// nodes of 8 GPUs, 4 VCs, 200 queued jobs across them behind the running
// ones. Every round rebuilds the cells and replays the leases (planner/vcs.go),
// so this is the price of keeping no bindings in memory:
//
//	go test ./planner -run '^$' -bench RoundVCs200
func BenchmarkRoundVCs200(b *testing.B) {
	ctx := context.Background()
	clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	fn, fs := plannertest.NewCluster(&clock, 3, 8), plannertest.NewStore()
	st := vcsStack(b, "fifo", "four-teams.hcl", fourTeams)
	p := New(Config{Nomad: fn, Store: fs, Stack: st, Now: func() time.Time { return clock }, DecideEveryRound: true})
	teams := []string{"a", "b", "c", "d"}
	for i := range 200 {
		fn.SubmitIn(fmt.Sprintf("job-%03d", i), 1+i%4, "be", "30s", teams[i%4], 0)
	}
	for range 3 {
		if err := p.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		clock = clock.Add(time.Second)
	}
	snap, err := fn.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	fn.Cached = snap
	timeRounds(b, p, &clock)
	b.ReportMetric(float64(len(snap.Jobs)), "jobs")
	b.ReportMetric(float64(len(fs.JobLeases)), "leases")
}

// timeRounds times b.N rounds of p, a second of clock apart.
func timeRounds(b *testing.B, p *Planner, clock *time.Time) {
	b.Helper()
	b.ResetTimer()
	for range b.N {
		*clock = clock.Add(time.Second)
		if err := p.Reconcile(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
