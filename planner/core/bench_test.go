package core

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// BenchmarkDecideFIFO measures one planner round on a 512-GPU cluster (64
// DGX-like nodes) with half the GPUs granted and 1,000 queued jobs.
func BenchmarkDecideFIFO(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	var nodes []Node
	for i := 0; i < 64; i++ {
		nodes = append(nodes, node8(fmt.Sprintf("n%02d", i)))
	}
	var jobs []Job
	var grants []Grant
	for i := 0; i < 64; i++ {
		// Half of every node is busy with a 4-GPU job.
		id := fmt.Sprintf("run%d", i)
		jobs = append(jobs, job(id, 4, i, Granted))
		n := nodes[i]
		grants = append(grants, grant(id, n.ID, n.GPUs[0].ID, n.GPUs[1].ID, n.GPUs[2].ID, n.GPUs[3].ID))
	}
	for i := 0; i < 1000; i++ {
		jobs = append(jobs, job(fmt.Sprintf("q%d", i), 1<<rng.Intn(4), 100+i, Queued))
	}
	s := State{Nodes: nodes, Jobs: jobs, Grants: grants}
	p := Planner{Policy: FIFO{}}
	now := time.Unix(1000, 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := p.Decide(s, now)
		if len(d.Actions) == 0 {
			b.Fatal("no grants")
		}
	}
}
