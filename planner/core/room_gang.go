package core

// What a Preemptor sees of a gang larger than a node, live (equal parts):
// the nodes that could hold its parts, and whether a set of victims, freed
// together, lets it be placed.

// PartsGang reports whether j, under equal parts, is a gang split over
// several nodes, and how many GPUs each part takes. It is false in the
// simulator (no equal parts), where FitGpp keeps the paper's one-node rule.
func (r *Room) PartsGang(j *Job) (per int, ok bool) {
	if !r.free.equalParts || j.GPUs <= r.free.x.largest {
		return 0, false
	}
	n, per, ok := r.free.x.Shape(j.GPUs)
	return per, ok && n >= 2
}

// OnPartNodes reports whether running job v holds GPUs on a node that could
// hold a part of per GPUs (one with at least per healthy GPUs).
func (r *Room) OnPartNodes(v *Job, per int) bool {
	x := r.free.x
	for _, id := range r.grant[v].GPUs {
		if p, ok := x.gpus[id]; ok && len(x.nodes[p.node].gpus) >= per {
			return true
		}
	}
	return false
}

// FitsWithAll reports whether j could be placed once all the running jobs
// vs have freed their GPUs, CPU and memory (on a copy of what is free).
func (r *Room) FitsWithAll(j *Job, vs []*Job) bool {
	c := r.free.clone()
	for _, v := range vs {
		c.give(r.grant[v])
		c.charge(r.grant[v], v, -1)
	}
	_, ok := c.PlaceJob(j, true)
	return ok
}
