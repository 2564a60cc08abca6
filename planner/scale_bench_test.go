package planner

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/plannertest"
	"github.com/themis-nomad/themis/planner/stack"
)

// BenchmarkRoundScale is one live planner round at cluster scale (#35):
// nodes of 8 GPUs, every GPU held by a running 4-GPU job, and queued jobs
// of 1-8 GPUs waiting behind them, over the adapters' data shapes held in
// memory (the fake Nomad's snapshot is cached), so it is the planner's own
// work in a round where nothing changed: observe, decide, act, statuses.
// It reports the rounds' p50 and p99 and the heap in use after them (MB).
// fifo+vcs is fifo with 10 teams' HiveD virtual clusters of a tenth of the
// nodes each, every job in one of them (TestScalePhilly's shape), whose
// round also builds the cells and replays every lease (planner/vcs.go).
// Run:
//
//	go test ./planner -run '^$' -bench 'RoundScale/fifo/nodes=1000/queued=10000' -benchtime 20x
func BenchmarkRoundScale(b *testing.B) {
	for _, policy := range []string{"fifo", "tiresias-las", "fifo+vcs"} {
		for _, nodes := range []int{100, 300, 1000} {
			for _, queued := range []int{1000, 5000, 10000} {
				b.Run(fmt.Sprintf("%s/nodes=%d/queued=%d", policy, nodes, queued), func(b *testing.B) {
					benchRoundScale(b, policy, nodes, queued)
				})
			}
		}
	}
}

func benchRoundScale(b *testing.B, policy string, nodes, queued int) {
	ctx := context.Background()
	clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	fn, fs := plannertest.NewCluster(&clock, nodes, 8), plannertest.NewStore()
	policy, vcs := strings.CutSuffix(policy, "+vcs")
	st := mustStack(b, policy, stack.Options{})
	team := func(int) string { return "default" }
	if vcs {
		var teams strings.Builder
		for k := range 10 {
			fmt.Fprintf(&teams, "vc \"team-%d\" {\n  cells {\n    type  = \"node8\"\n    count = %d\n  }\n  namespace \"*\" {}\n}\n", k, nodes/10)
		}
		st = vcsStack(b, policy, "ten-teams.hcl", teams.String())
		team = func(i int) string { return fmt.Sprintf("team-%d", i%10) }
	}
	p := New(Config{Nomad: fn, Store: fs, Stack: st, Now: func() time.Time { return clock }, DecideEveryRound: true})
	running := nodes * 2
	for i := range running {
		fn.SubmitIn(fmt.Sprintf("run-%05d", i), 4, "be", "30s", team(i), 0)
	}
	for range 3 {
		if err := p.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		clock = clock.Add(time.Minute)
	}
	if len(fs.JobLeases) != running {
		b.Fatalf("%d leases after the grant rounds, want %d", len(fs.JobLeases), running)
	}
	for i := range queued {
		fn.SubmitIn(fmt.Sprintf("queued-%05d", i), 1+i%8, "be", "30s", team(i), 0)
	}
	if err := p.Reconcile(ctx); err != nil {
		b.Fatal(err)
	}
	snap, err := fn.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	fn.Cached = snap
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		clock = clock.Add(time.Second)
		start := time.Now()
		if err := p.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMB")
	b.ReportMetric(float64(len(snap.Jobs)), "jobs")
}
