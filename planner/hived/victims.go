package hived

import "github.com/themis-nomad/themis/planner/core"

// Checkpoint-aware victims (preempt.victims=least-lost-work; see
// planner/core/victims.go). A guaranteed job evicts the opportunistic jobs
// on the physical cells its virtual cells bind to, and preempts
// lower-priority jobs of its VC when its cells are full. By default a
// binding prefers the cell with the fewest opportunistic GPUs, and the
// VC's lower-priority jobs go lowest priority, then newest, first. With a
// victim cost set (SetVictimCost: the GPU-seconds of work a job would lose
// if preempted now), a binding prefers, before counting GPUs, the cell
// whose opportunistic jobs would lose the least in all (a job with GPUs in
// the cell counts whole, as its gang is preempted whole; like the GPU
// count, the cost is over the cell being bound), and among the VC's jobs
// of one priority the cheapest go first. Costs of 0 tie, and the default
// order decides.

// SetVictimCost sets the cost of preempting a job (nil: the default
// choices). The cluster calls it during Allocate only, for allocated jobs.
func (c *Cluster) SetVictimCost(cost func(core.JobKey) float64) { c.victimCost = cost }

// oppCost is the victim cost of the opportunistic jobs holding GPUs in x
// (0 without a victim cost, or without such jobs).
func (c *Cluster) oppCost(x *cell) float64 {
	if c.victimCost == nil || x.opp == 0 {
		return 0
	}
	seen := c.oppSeen[:0]
	var walk func(y *cell)
	walk = func(y *cell) {
		if y.opp == 0 {
			return
		}
		if y.isLeaf() {
			for _, j := range seen {
				if j == y.job {
					return
				}
			}
			seen = append(seen, y.job)
			return
		}
		for _, ch := range y.children {
			walk(ch)
		}
	}
	walk(x)
	cost := 0.0
	for _, j := range seen {
		cost += c.victimCost(j.key)
	}
	clear(seen)
	c.oppSeen = seen[:0]
	return cost
}

// jobCost is the victim cost of an allocated job (0 without one).
func (c *Cluster) jobCost(j *job) float64 {
	if c.victimCost == nil {
		return 0
	}
	return c.victimCost(j.key)
}
