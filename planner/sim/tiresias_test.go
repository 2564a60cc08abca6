package sim

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/trace"
)

// TestTiresiasRunningFirst works by hand the rule behind most of the gap
// between our tiresias-las and the Tiresias simulator's dlas-gpu (issue
// #17; docs/tiresias.md): inside a queue, a waiting job must not take the
// GPUs of a running job of the same queue.
//
// One node of 4 GPUs, one threshold at 100 GPU-seconds, no preemption
// cost. A (4 GPUs, 1,000 s) arrives at 0; C (4 GPUs, 100 s) at 30.
//
//   - A runs from 0 and is demoted at 25 (4 x 25 = 100); C arrives in the
//     first queue at 30 and preempts it (A has 970 s left).
//   - C is demoted at 55. Both are now in the last queue: A waiting, C
//     running.
//   - Running first (the default): C keeps its GPUs and ends at 130; A
//     runs 130-1,100. JCTs 100 and 1,100: average 600.
//   - By first start alone (tiresias.order=start, our rule before #17): A
//     started first, so it takes the GPUs back at 55 and ends at 1,025; C
//     runs its last 75 s after it and ends at 1,100. JCTs 1,070 and
//     1,025: average 1,047.5, and C, a short job, waits behind a long one.
//
// The old rule served the job with the most attained service first
// whenever a higher queue had pushed it out: the opposite of LAS inside
// every queue but the first.
func TestTiresiasRunningFirst(t *testing.T) {
	tr := &trace.Trace{Name: "running-first", Jobs: []trace.Job{
		{ID: "A", GPUs: 4, Duration: 1000, Model: "resnet50"},
		{ID: "C", GPUs: 4, Submit: 30, Duration: 100, Model: "resnet50"},
	}}
	cl := mustCluster(t)(cluster.Uniform("one-4gpu", 1, 1, 4))
	for _, c := range []struct {
		order       string
		ends        []float64
		avg         float64
		preemptions int
	}{
		{"running", []float64{1100, 130}, 600, 1},
		{"start", []float64{1025, 1100}, 1047.5, 2},
	} {
		r := run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, "tiresias-las", "tiresias.queues=100", "tiresias.order="+c.order)})
		if !closeAll(ends(r), c.ends) || math.Abs(avgJCT(r)-c.avg) > tol || r.Preemptions != c.preemptions {
			t.Errorf("order=%s: ends %v (average JCT %v) with %d preemptions, want %v (%v) with %d",
				c.order, ends(r), avgJCT(r), r.Preemptions, c.ends, c.avg, c.preemptions)
		}
	}
}

// TestLargeClockEnds: a running job whose remainder is too small to move a
// clock of millions of seconds (Muri's traces: times in ms over weeks,
// slowed down by a spread placement) ends instead of stalling the
// simulation at one instant.
func TestLargeClockEnds(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	tr := &trace.Trace{Name: "large-clock"}
	for i := range 300 {
		tr.Jobs = append(tr.Jobs, trace.Job{ID: fmt.Sprint(i), GPUs: []int{4, 8, 16, 32}[rng.Intn(4)], Model: "vgg16",
			Submit: float64(i)*3000.123 + 1e6, Duration: float64(rng.Intn(4e9)) / 1000})
	}
	cl := mustCluster(t)(cluster.Uniform("n8g8", 1, 8, 8))
	for _, name := range []string{"fifo", "tiresias-las", "srsf"} {
		done := make(chan *Result)
		go func() { done <- run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, name)}) }()
		select {
		case r := <-done:
			for _, j := range r.Jobs {
				if !j.Finished {
					t.Fatalf("%s: job %s did not finish", name, j.ID)
				}
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no end after 20 s", name)
		}
	}
}
