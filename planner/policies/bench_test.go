package policies

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// BenchmarkDecideFIFO measures one planner round on a 512-GPU cluster (64
// DGX-like nodes) with half the GPUs granted and 1,000 queued jobs.
func BenchmarkDecideFIFO(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	var nodes []core.Node
	for i := 0; i < 64; i++ {
		nodes = append(nodes, node8(fmt.Sprintf("n%02d", i)))
	}
	var jobs []core.Job
	var grants []core.Grant
	for i := 0; i < 64; i++ {
		// Half of every node is busy with a 4-GPU job.
		id := fmt.Sprintf("run%d", i)
		jobs = append(jobs, job(id, 4, i, core.Granted))
		n := nodes[i]
		grants = append(grants, grant(id, n.ID, n.GPUs[0].ID, n.GPUs[1].ID, n.GPUs[2].ID, n.GPUs[3].ID))
	}
	for i := 0; i < 1000; i++ {
		jobs = append(jobs, job(fmt.Sprintf("q%d", i), 1<<rng.Intn(4), 100+i, core.Queued))
	}
	s := core.State{Nodes: nodes, Jobs: jobs, Grants: grants}
	p := core.Scheduler{Policy: FIFO{}}
	now := time.Unix(1000, 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := p.Decide(s, now)
		if len(d.Actions) == 0 {
			b.Fatal("no grants")
		}
	}
}

// BenchmarkDecideTiresias measures one round of tiresias-las in the shape
// the full Philly trace gives the simulator on the 480-GPU philly preset
// (here 60 nodes of 8 GPUs): 3,800 active jobs, of which about 240 run in
// the first queue and fill all but one GPU; 2,600 queued jobs preempted into the second queue
// and 1,000 new arrivals wait. The round grants the free GPU to the first
// 1-GPU arrival and changes nothing else, as most simulator events do. One
// op is one simulator event.
func BenchmarkDecideTiresias(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	var nodes []core.Node
	for i := 0; i < 60; i++ {
		nodes = append(nodes, node8(fmt.Sprintf("n%02d", i)))
	}
	var jobs []core.Job
	var grants []core.Grant
	base := time.Unix(0, 0)
	used := 0 // GPUs granted, node after node
	for i := 0; len(jobs) < 3800; i++ {
		j := core.Job{Key: core.JobKey{Namespace: "sim", ID: fmt.Sprintf("j%05d", i)}, GPUs: 1 << rng.Intn(3), Submitted: base.Add(time.Duration(i) * time.Minute), Seq: uint64(i), Phase: core.Queued, Remaining: -1, Skew: 1.1}
		started := func() {
			j.Started, j.FirstStart = true, j.Submitted.Add(time.Duration(rng.Intn(600))*time.Second)
		}
		switch {
		case i%12 == 0 && used < 479:
			if free := 8 - used%8; j.GPUs > free || used+j.GPUs > 479 {
				j.GPUs = 1
			}
			j.Phase = core.Granted
			started()
			j.Executed = float64(rng.Intn(3200 / 8))
			n := nodes[used/8]
			g := core.Grant{Job: j.Key, Node: n.ID}
			for k := 0; k < j.GPUs; k++ {
				g.GPUs = append(g.GPUs, n.GPUs[used%8+k].ID)
			}
			used += j.GPUs
			grants = append(grants, g)
		case i < 3000:
			started()
			j.Executed = 3200 + float64(rng.Intn(7200))
		}
		j.Attained = j.Executed * float64(j.GPUs)
		jobs = append(jobs, j)
	}
	pol, err := newPolicy("tiresias-las", core.Knobs{})
	if err != nil {
		b.Fatal(err)
	}
	s := core.State{Nodes: nodes, Jobs: jobs, Grants: grants, Index: core.NewClusterIndex(nodes)}
	p := core.Scheduler{Policy: pol}
	now := base.Add(4000 * time.Minute)
	if d := p.Decide(s, now); len(d.Actions) != 1 {
		b.Fatalf("the round does %d actions (%v), want one grant", len(d.Actions), d.Actions)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.Decide(s, now)
	}
}
