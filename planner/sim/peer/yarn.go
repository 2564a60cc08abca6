package peer

import (
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// The Tiresias simulator's "yarn" scheme (cluster.py ms_yarn_placement,
// switch.py ms_yarn_alloc_res) for its fifo, shortest and shortest-gpu;
// its dlas disciplines count GPUs under every scheme. A gang of at most a
// node's GPUs goes to the first node, in order, with that many free; a
// larger one takes the first floor(g / per node) wholly free nodes and,
// for the rest, the first other node with enough free. The peer also
// checks CPUs and memory, which its cluster specs of 128 CPUs and 256 GB
// per node never run out of with these gangs; they are not modelled.
// Placement is all or nothing; a cluster is one switch.

// yarnNodes is the cluster's nodes in order, with every GPU, and how many
// of each are free.
type yarnNodes struct {
	nodes []core.Node
	free  []int
	// avail are each node's free GPU IDs, in order.
	avail [][]string
	at    map[string]int // GPU ID -> node
}

func newYarnNodes(free *core.FreeGPUs, grants []core.Grant) *yarnNodes {
	y := &yarnNodes{nodes: free.FreeNodes(grants...), at: map[string]int{}}
	y.free = make([]int, len(y.nodes))
	y.avail = make([][]string, len(y.nodes))
	for i, n := range y.nodes {
		for _, g := range n.GPUs {
			y.at[g.ID] = i
			y.avail[i] = append(y.avail[i], g.ID)
		}
		y.free[i] = len(n.GPUs)
	}
	return y
}

// hold marks a grant's GPUs as used.
func (y *yarnNodes) hold(g core.Grant) {
	for _, id := range g.GPUs {
		i := y.at[id]
		for k, a := range y.avail[i] {
			if a == id {
				y.avail[i] = append(y.avail[i][:k], y.avail[i][k+1:]...)
				y.free[i]--
				break
			}
		}
	}
}

// place finds a gang of g GPUs by the yarn rule: a count per node, or nil.
func (y *yarnNodes) place(g int) map[int]int {
	if len(y.nodes) == 0 {
		return nil
	}
	per := len(y.nodes[0].GPUs)
	if g <= per {
		for i, f := range y.free {
			if f >= g {
				return map[int]int{i: g}
			}
		}
		return nil
	}
	out := map[int]int{}
	for i, f := range y.free {
		if len(out) == g/per {
			break
		}
		if f == len(y.nodes[i].GPUs) {
			out[i] = f
		}
	}
	if len(out) < g/per {
		return nil
	}
	if last := g % per; last != 0 {
		for i, f := range y.free {
			if _, full := out[i]; !full && f >= last {
				out[i] = last
				return out
			}
		}
		return nil
	}
	return out
}

// take turns counts per node into a grant of the first free GPUs there.
func (y *yarnNodes) take(job core.JobKey, counts map[int]int) core.Grant {
	g := core.Grant{Job: job}
	for i := range y.nodes {
		c, ok := counts[i]
		if !ok {
			continue
		}
		if g.Node == "" {
			g.Node = y.nodes[i].ID
		}
		g.GPUs = append(g.GPUs, y.avail[i][:c]...)
		y.avail[i] = y.avail[i][c:]
		y.free[i] -= c
	}
	return g
}

// counts is a grant's GPUs per node.
func (y *yarnNodes) counts(g core.Grant) map[int]int {
	out := map[int]int{}
	for _, id := range g.GPUs {
		out[y.at[id]]++
	}
	return out
}

// YarnFIFO is one_queue_fifo_sim_jobs under the yarn scheme: pending
// jobs in arrival order, each placed by the yarn rule on the GPUs left,
// until the first that cannot be.
type YarnFIFO struct{ FIFO }

// Capabilities implements Policy: the peer's YARN scheme allocates.
func (p YarnFIFO) Capabilities() core.Capabilities { return core.Capabilities{Policy: p, Allocator: p} }

// Allocate implements Allocator.
func (YarnFIFO) Allocate(_ time.Time, jobs []*core.Job, free *core.FreeGPUs, grants []core.Grant) ([]core.Grant, []core.JobKey) {
	y := newYarnNodes(free, grants)
	for _, g := range grants {
		y.hold(g)
	}
	var out []core.Grant
	for _, j := range jobs {
		if j.Phase != core.Queued {
			continue
		}
		c := y.place(j.GPUs)
		if c == nil {
			break
		}
		out = append(out, y.take(j.Key, c))
	}
	return out, nil
}

// YarnShortest is shortest_first_sim_jobs under the yarn scheme: every
// pass empties the cluster (empty_infra) and places the runnable jobs in
// the sorted order by the yarn rule; a running job that is placed again
// keeps running (on the nodes it had, when the counts per node agree; else
// it moves, for free), one that is not is preempted.
type YarnShortest struct{ *Shortest }

// Capabilities implements Policy: the peer's YARN scheme allocates.
func (p YarnShortest) Capabilities() core.Capabilities {
	return core.Capabilities{Policy: p, Allocator: p}
}

// Allocate implements Allocator.
func (p YarnShortest) Allocate(_ time.Time, jobs []*core.Job, free *core.FreeGPUs, grants []core.Grant) ([]core.Grant, []core.JobKey) {
	y := newYarnNodes(free, grants)
	held := map[core.JobKey]core.Grant{}
	for _, g := range grants {
		held[g.Job] = g
	}
	want := make([]map[int]int, len(jobs))
	for i, j := range jobs {
		want[i] = y.place(j.GPUs)
		for n, c := range want[i] {
			y.free[n] -= c
		}
	}
	// Start again from the real free GPUs: running jobs that stay where
	// they are keep theirs; the others are preempted, and every placed
	// job that is not running now is granted its counts.
	y = newYarnNodes(free, grants)
	var stop []core.JobKey
	keep := make([]bool, len(jobs))
	for i, j := range jobs {
		g, running := held[j.Key]
		if !running {
			continue
		}
		if want[i] != nil && sameCounts(y.counts(g), want[i]) {
			keep[i] = true
			y.hold(g)
			continue
		}
		stop = append(stop, j.Key)
	}
	var out []core.Grant
	for i, j := range jobs {
		if want[i] != nil && !keep[i] {
			out = append(out, y.take(j.Key, want[i]))
		}
	}
	return out, stop
}

func sameCounts(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
