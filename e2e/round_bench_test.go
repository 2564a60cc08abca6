package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// Four virtual clusters over the 3-client dev cluster's 24 GPUs.
const fourVCsDevCluster = `
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

// BenchmarkLiveRound200Queued4VCs is the live planner's round latency
// against real agents: a Nomad server with 3 clients (24 GPUs) and a Consul,
// 4 HiveD virtual clusters, about 200 themis jobs queued behind the ones
// that fill the VCs. One op is one Reconcile: read leases, records,
// checkpoints and statuses from Consul and nodes, jobs and allocations from
// Nomad, replay the leases into the cells, decide, write statuses. Run:
//
//	make agents && THEMIS_AGENTS_DIR=$(e2e/agents/build.sh) \
//	  go test ./e2e -run '^$' -bench LiveRound200Queued4VCs -benchtime 50x
func BenchmarkLiveRound200Queued4VCs(b *testing.B) {
	vcs, err := hived.ParseConfig("four-vcs.hcl", []byte(fourVCsDevCluster))
	if err != nil {
		b.Fatal(err)
	}
	st := mustStack(b, "fifo", stack.Options{VCs: vcs})
	benchLiveRound(b, st, func(i int) trainJob {
		return trainJob{gpus: []int{1, 2, 4}[i%3], vc: []string{"a", "b", "c", "d"}[i%4], steps: 100000}
	})
}

// BenchmarkLiveRoundThemis is the same with Themis's auction (no VCs): 208
// jobs in 26 apps of 8 jobs, a 10-minute lease. One op is one Reconcile,
// which runs an auction round when GPUs are free or a lease ended, and
// otherwise only the arbiter's bookkeeping:
//
//	make agents && THEMIS_AGENTS_DIR=$(e2e/agents/build.sh) \
//	  go test ./e2e -run '^$' -bench LiveRoundThemis -benchtime 50x
func BenchmarkLiveRoundThemis(b *testing.B) {
	st := mustStack(b, "themis", stack.Options{Knobs: mustKnobs(b, "themis.lease=10m")})
	benchLiveRound(b, st, func(i int) trainJob {
		return trainJob{gpus: []int{1, 2, 4}[i%3], app: fmt.Sprintf("app-%02d", i/8), steps: 100000}
	})
}

func benchLiveRound(b *testing.B, st *stack.Stack, shape func(i int) trainJob) {
	ctx, cancel := context.WithTimeout(env.ctx, 10*time.Minute)
	defer cancel()
	m := startMultiCluster(b, ctx)
	nc := nomad.NewClient(m.nomad, "", env.log.Named("bench-nomad"))
	if err := nc.EnsurePendingPool(ctx); err != nil {
		b.Fatal(err)
	}
	p := planner.New(planner.Config{Nomad: nc, Store: consul.NewStore(m.consul), Stack: st,
		MaxKillTimeout: 30 * time.Minute, Log: env.log.Named("bench-planner")})
	const jobs = 208
	for i := range jobs {
		id := fmt.Sprintf("q-%03d", i)
		job := shape(i).build(b, id)
		if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
			b.Fatal(err)
		}
	}
	// Rounds until the cluster is full and every job is seen; the first
	// one decides over every job with all GPUs free (Themis: an auction
	// round over every app).
	var first time.Duration
	for i := range 5 {
		start := time.Now()
		if err := p.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			first = time.Since(start)
		}
	}
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := p.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	leases, err := consul.NewStore(m.consul).Leases(ctx)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(jobs), "jobs")
	b.ReportMetric(float64(len(leases)), "granted")
	b.ReportMetric(ms(lat[len(lat)/2]), "median-ms")
	b.ReportMetric(ms(lat[len(lat)*95/100]), "p95-ms")
	b.ReportMetric(ms(first), "first-round-ms")
	// Stop the running tasks before the cluster closes.
	for i := range jobs {
		_, _, _ = m.nomad.Jobs().Deregister(fmt.Sprintf("q-%03d", i), true, nil)
	}
}
