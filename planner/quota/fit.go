package quota

import (
	"slices"

	"github.com/themis-nomad/themis/planner/core"
)

// The fits of the quota baselines other than the core's best fit: each
// chooses GPUs among the free ones and takes them from free.

// firstFit places j on the first node (in name order) with j.GPUs free
// GPUs, else on the first free GPUs of the cluster in node order.
func firstFit(j *core.Job, free *core.FreeGPUs) (core.Grant, bool) {
	if j.GPUs <= 0 || j.GPUs > free.Total() {
		return core.Grant{}, false
	}
	nodes := free.FreeNodes()
	for _, n := range nodes {
		if len(n.GPUs) >= j.GPUs {
			return take(j, free, []core.Node{n})
		}
	}
	return take(j, free, nodes)
}

// affinity is Gandiva's placement (see Affinity).
func (q *Placer) affinity(j *core.Job, free *core.FreeGPUs) (core.Grant, bool) {
	if j.GPUs <= 0 || j.GPUs > free.Total() {
		return core.Grant{}, false
	}
	nodes := free.FreeNodes()
	// Classes, best first: only jobs of j's size, nothing running, the
	// rest (the most free GPUs first).
	class := func(n core.Node) int {
		switch s := q.sizes[n.ID]; {
		case len(s) == 1 && s[j.GPUs] > 0:
			return 0
		case len(s) == 0:
			return 1
		}
		return 2
	}
	var best *core.Node
	for i := range nodes {
		n := &nodes[i]
		if len(n.GPUs) < j.GPUs {
			continue
		}
		if best == nil || class(*n) < class(*best) || class(*n) == class(*best) && class(*n) == 2 && len(n.GPUs) > len(best.GPUs) {
			best = n
		}
	}
	if best != nil {
		return take(j, free, []core.Node{*best})
	}
	// A gang no node holds: idle nodes first, then the fullest free ones.
	slices.SortStableFunc(nodes, func(a, b core.Node) int {
		ia, ib := len(q.sizes[a.ID]) == 0, len(q.sizes[b.ID]) == 0
		switch {
		case ia && !ib:
			return -1
		case ib && !ia:
			return 1
		}
		return len(b.GPUs) - len(a.GPUs)
	})
	return take(j, free, nodes)
}

// take grants j the first j.GPUs free GPUs of nodes, in order.
func take(j *core.Job, free *core.FreeGPUs, nodes []core.Node) (core.Grant, bool) {
	g := core.Grant{Job: j.Key}
	used := 0
	for _, n := range nodes {
		if len(g.GPUs) == j.GPUs {
			break
		}
		used++
		g.Node = n.ID
		for _, x := range n.GPUs {
			if len(g.GPUs) < j.GPUs {
				g.GPUs = append(g.GPUs, x.ID)
			}
		}
	}
	if len(g.GPUs) < j.GPUs {
		return core.Grant{}, false
	}
	if used > 1 {
		g.Node = "" // a gang over several nodes, as hived grants it
	}
	return g, free.Take(g)
}

// nodesOf is the nodes of a grant's GPUs, each once.
func nodesOf(g core.Grant, free *core.FreeGPUs) []string {
	if g.Node != "" {
		return []string{g.Node}
	}
	var out []string
	for _, id := range g.GPUs {
		if n, ok := free.Locate(id); ok && !slices.Contains(out, n.ID) {
			out = append(out, n.ID)
		}
	}
	return out
}
