package hived

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
)

// benchCluster is 8 racks x 64 nodes x 8 GPUs (4,096 GPUs) with 16 VCs
// (4 owning a rack each, 12 owning 8 nodes, 8 sockets and 8 pairs each),
// loaded to about half its GPUs by guaranteed and opportunistic jobs.
func benchCluster(b *testing.B) *Cluster {
	cl, err := cluster.Uniform("bench", 8, 64, 8)
	if err != nil {
		b.Fatal(err)
	}
	cfg := &Config{}
	for i := 0; i < 16; i++ {
		v := VCConfig{Name: fmt.Sprintf("vc%02d", i)}
		if i < 4 {
			v.Cells = []CellCount{{Type: "rack512", Count: 1}}
		} else {
			v.Cells = []CellCount{{Type: "node8", Count: 8}, {Type: "socket4", Count: 8}, {Type: "pair2", Count: 8}}
		}
		cfg.VCs = append(cfg.VCs, v)
	}
	c, err := New(cl.Nodes, cfg)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	sizes := []int{1, 2, 4, 8, 16}
	for i := 0; c.IdleGPUs() > c.GPUs()/2; i++ {
		req := Request{Job: key(fmt.Sprintf("load%d", i)), VC: fmt.Sprintf("vc%02d", rng.Intn(16)), GPUs: sizes[rng.Intn(len(sizes))], Priority: rng.Intn(2)}
		if i%5 == 0 {
			req.Priority = Opportunistic
		}
		c.Allocate(req)
	}
	return c
}

// BenchmarkAllocateRelease: one allocation and its release on the loaded
// 4,096-GPU cluster, cycling through the VCs and gang sizes 1-16.
func BenchmarkAllocateRelease(b *testing.B) {
	c := benchCluster(b)
	sizes := []int{1, 2, 4, 8, 16}
	reqs := make([]Request, 16*len(sizes))
	for i := range reqs {
		reqs[i] = Request{Job: key(fmt.Sprintf("b%d", i)), VC: fmt.Sprintf("vc%02d", i%16), GPUs: sizes[i%len(sizes)], Priority: 2}
	}
	ok := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := reqs[i%len(reqs)]
		if _, err := c.Allocate(r); err == nil {
			ok++
			c.Release(r.Job)
		}
	}
	b.ReportMetric(float64(ok)/float64(b.N), "placed/op")
}

// BenchmarkAllocateReleaseOpportunistic: the same for opportunistic jobs,
// which search the whole physical tree.
func BenchmarkAllocateReleaseOpportunistic(b *testing.B) {
	c := benchCluster(b)
	sizes := []int{1, 2, 4, 8, 16}
	ok := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := Request{Job: key("opp"), GPUs: sizes[i%len(sizes)], Priority: Opportunistic}
		if _, err := c.Allocate(r); err == nil {
			ok++
			c.Release(r.Job)
		}
	}
	b.ReportMetric(float64(ok)/float64(b.N), "placed/op")
}

// BenchmarkAllocateReleaseBadGPUs: the same with one GPU in 64 bad, which
// makes binding weigh every candidate cell against the healthy free cells.
func BenchmarkAllocateReleaseBadGPUs(b *testing.B) {
	c := benchCluster(b)
	for i, x := range c.cells {
		if x.isLeaf() && i%64 == 7 {
			c.SetHealthy(x.name, false)
		}
	}
	sizes := []int{1, 2, 4, 8, 16}
	reqs := make([]Request, 16*len(sizes))
	for i := range reqs {
		reqs[i] = Request{Job: key(fmt.Sprintf("b%d", i)), VC: fmt.Sprintf("vc%02d", i%16), GPUs: sizes[i%len(sizes)], Priority: 2}
	}
	ok := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := reqs[i%len(reqs)]
		if _, err := c.Allocate(r); err == nil {
			ok++
			c.Release(r.Job)
		}
	}
	b.ReportMetric(float64(ok)/float64(b.N), "placed/op")
}

// BenchmarkBindRelease: on the empty cluster with one GPU in 97 bad, every
// allocation binds one or two of a VC's cells (splitting racks and nodes)
// and every release unbinds and merges them: the slowest path.
func BenchmarkBindRelease(b *testing.B) {
	cl, err := cluster.Uniform("bench", 8, 64, 8)
	if err != nil {
		b.Fatal(err)
	}
	cfg := &Config{}
	for i := 0; i < 16; i++ {
		cfg.VCs = append(cfg.VCs, VCConfig{Name: fmt.Sprintf("vc%02d", i), Cells: []CellCount{{Type: "node8", Count: 16}, {Type: "pair2", Count: 32}}})
	}
	c, err := New(cl.Nodes, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for i, x := range c.cells {
		if x.isLeaf() && i%97 == 7 {
			c.SetHealthy(x.name, false)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := Request{Job: key("x"), VC: fmt.Sprintf("vc%02d", i%16), GPUs: []int{8, 2, 16}[i%3], Priority: 1}
		if _, err := c.Allocate(r); err != nil {
			b.Fatal(err)
		}
		c.Release(r.Job)
	}
}

// BenchmarkNewVersusClone: what the live planner's round pays for the
// cells before it replays its leases (planner/vcs.go), at 1,000 nodes of 8
// GPUs in 25 racks with 10 VCs of 100 nodes each (TestScalePhilly's
// shape): building them (New) or copying the cluster built once (Clone).
//
//	go test ./planner/hived -run '^$' -bench NewVersusClone
func BenchmarkNewVersusClone(b *testing.B) {
	cl, err := cluster.Uniform("scale", 25, 40, 8)
	if err != nil {
		b.Fatal(err)
	}
	cfg := &Config{}
	for i := range 10 {
		cfg.VCs = append(cfg.VCs, VCConfig{Name: fmt.Sprintf("team-%d", i), Cells: []CellCount{{Type: "node8", Count: 100}}})
	}
	built, err := New(cl.Nodes, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) {
		for range b.N {
			if _, err := New(cl.Nodes, cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("clone", func(b *testing.B) {
		for range b.N {
			built.Clone()
		}
	})
}
