package hived

import (
	"fmt"
	"sort"
	"strings"
)

// Adopt records a job that already runs on exactly the given GPUs, as a
// restarted planner replays the jobs that hold GPUs (HiveD's
// AddAllocatedPod): it rebuilds a Cluster with New from the nodes and the
// VC config, then adopts every running job, in the order the jobs were
// first granted.
//
// A guaranteed job (req.Priority >= 0) takes free virtual GPUs of its VC
// bound to its GPUs: under the VC's cell already bound around a GPU, else
// under one of the VC's unbound cells, bound to the cell around the GPU
// (of the cells above the GPU the VC has an unbound cell of the type for:
// the one holding most of the job's GPUs, then the smallest), as long as
// the other VCs' unbound cells all stay placeable (the invariant Allocate
// keeps). An opportunistic job (req.Priority < 0) just holds its GPUs,
// inside VCs' cells or not.
//
// req.GPUs is the gang size: 0 or len(gpus). req.SingleNode is not
// checked. A GPU may be unhealthy: a job keeps a GPU that went bad until
// the caller releases it, and the replay records that.
//
// Seniority: each adopted job is newer than every job allocated or adopted
// before it (it gets the next sequence number, as Allocate does), which
// decides which of a VC's jobs of one priority Allocate preempts first (the
// newest). Jobs adopted in the order they were first granted keep their
// relative seniority; the caller keeps that order (e.g. the lease's grant
// time) with the lease.
//
// On error nothing changes; the error names the job and the GPU or VC, and
// wraps ErrInvalidRequest (no GPUs, a size mismatch, a job already
// allocated, an unknown, repeated or held GPU), ErrUnknownVC, or
// ErrNoCapacity (the VC has no free virtual cell there: the GPU lies in
// another VC's cell, or the VC has no unbound cell of a type around it, or
// binding one would leave another VC's cells unplaceable).
func (c *Cluster) Adopt(req Request, gpus []string) error {
	if len(gpus) == 0 {
		return fmt.Errorf("hived: job %s: %w: adopts no GPUs", req.Job, ErrInvalidRequest)
	}
	if req.GPUs != 0 && req.GPUs != len(gpus) {
		return fmt.Errorf("hived: job %s: %w: asks for %d GPUs but runs on %d (%s)", req.Job, ErrInvalidRequest,
			req.GPUs, len(gpus), strings.Join(gpus, ", "))
	}
	j := &job{key: req.Job, vcName: req.VC, prio: req.Priority, seq: c.seq + 1}
	if err := c.adopt(j, gpus); err != nil {
		return err
	}
	c.seq++
	return nil
}

// adopt records j (its key, VC, priority and sequence number set) on the
// GPUs of the given IDs, filling in the rest; on error it changes nothing.
func (c *Cluster) adopt(j *job, ids []string) error {
	if _, dup := c.jobs[j.key]; dup {
		return fmt.Errorf("hived: job %s: %w: it is already allocated", j.key, ErrInvalidRequest)
	}
	phys := make([]*cell, len(ids))
	for i, id := range ids {
		q := c.gpus[id]
		switch {
		case q == nil:
			return fmt.Errorf("hived: job %s: %w: unknown GPU %q", j.key, ErrInvalidRequest, id)
		case q.job != nil:
			return fmt.Errorf("hived: job %s: %w: GPU %s is held by job %s", j.key, ErrInvalidRequest, id, q.job.key)
		}
		for _, p := range phys[:i] {
			if p == q {
				return fmt.Errorf("hived: job %s: %w: GPU %s is listed twice", j.key, ErrInvalidRequest, id)
			}
		}
		phys[i] = q
	}
	j.phys = phys
	if j.guaranteed() {
		v := c.vcByName[j.vcName]
		if v == nil {
			return fmt.Errorf("hived: job %s: %w %q", j.key, ErrUnknownVC, j.vcName)
		}
		virt, err := c.bindAt(v, phys)
		if err != nil {
			return fmt.Errorf("hived: job %s: %w: vc %q: %v", j.key, ErrNoCapacity, v.name, err)
		}
		j.v, j.virt = v, virt
		for _, l := range virt {
			o := vleafState(l)
			l.job = j
			vchange(l, o)
		}
		v.jobs[j.key] = j
	}
	for _, p := range phys {
		o := pleafState(p)
		p.job = j
		pchange(p, o)
	}
	c.jobs[j.key] = j
	return nil
}

// bindAt binds free virtual GPUs of v to the given physical GPUs (a job's):
// under the VC's cell already bound above a GPU, or else under a newly bound
// cell of the VC above the GPU: of the cells above it that the VC has an
// unbound cell of the type for, the one holding most of the job's GPUs, then
// the smallest, whose binding keeps the VCs' cells placeable. On failure it
// undoes its bindings and says why.
func (c *Cluster) bindAt(v *vc, phys []*cell) ([]*cell, error) {
	var binds []*cell
	undo := func() {
		for i := len(binds) - 1; i >= 0; i-- {
			x := binds[i]
			if x.parent == v.root {
				c.unbindTop(x)
			} else {
				x.bound.bound, x.bound = nil, nil
			}
		}
	}
	fail := func(format string, args ...any) ([]*cell, error) {
		undo()
		return nil, fmt.Errorf(format, args...)
	}
	virt := make([]*cell, len(phys))
	for i, p := range phys {
		var path []*cell // unbound physical cells from p up
		x := p
		for ; x != nil && x.bound == nil; x = x.parent {
			path = append(path, x)
		}
		var vx *cell
		if x != nil {
			if x.bound.vc != v {
				return fail("GPU %s lies in cell %s, bound to vc %q's cell %s", p.name, x.name, x.bound.vc.name, c.vname(x.bound))
			}
			vx = x.bound
		} else {
			// Candidates: the cells above p the VC has an unbound cell of
			// the type for; those holding more of the job's GPUs first, then
			// the smaller.
			type cand struct{ t, cover int }
			var cands []cand
			for t, q := range path {
				if v.unboundTop(q.typ) == nil {
					continue
				}
				cover := 0
				for _, g := range phys {
					if g == q || isAncestor(q, g) {
						cover++
					}
				}
				cands = append(cands, cand{t, cover})
			}
			if len(cands) == 0 {
				return fail("GPU %s: the vc has no unbound cell of a type around it (%s)", p.name, typesAbove(path))
			}
			sort.SliceStable(cands, func(a, b int) bool { return cands[a].cover > cands[b].cover })
			var tried []string
			for _, cd := range cands {
				q := path[cd.t]
				top := v.unboundTop(q.typ)
				if !c.takeCell(q) {
					tried = append(tried, q.name+" is not free")
					continue
				}
				c.attachTop(top, q)
				if c.feasible() {
					binds = append(binds, top)
					vx, path = top, path[:cd.t]
					break
				}
				c.unbindTop(top)
				tried = append(tried, "binding "+q.name+" would leave other VCs' cells unplaceable")
			}
			if vx == nil {
				return fail("GPU %s: no cell around it can be bound to the vc (%s)", p.name, strings.Join(tried, "; "))
			}
		}
		for t := len(path) - 1; t >= 0; t-- {
			q := path[t]
			var ch *cell
			for _, y := range vx.children {
				if y.bound == nil && y.typ == q.typ {
					ch = y
					break
				}
			}
			if ch == nil {
				return fail("GPU %s: the vc's cell %s (bound to %s) has no unbound %s cell left for %s", p.name, c.vname(vx), vx.bound.name, typeName(q.typ), q.name)
			}
			ch.bound, q.bound = q, ch
			binds = append(binds, ch)
			vx = ch
		}
		switch {
		case !vx.isLeaf():
			return fail("GPU %s is bound to the vc's cell %s, not to a virtual GPU", p.name, c.vname(vx))
		case vx.job != nil:
			return fail("GPU %s: its virtual GPU %s is held by job %s", p.name, c.vname(vx), vx.job.key)
		case vx.doomed > 0:
			return fail("GPU %s: its virtual GPU %s is doomed to bad hardware", p.name, c.vname(vx))
		}
		virt[i] = vx
	}
	return virt, nil
}

// typesAbove lists the types of the cells on a path, bottom-up.
func typesAbove(path []*cell) string {
	var names []string
	for _, q := range path {
		names = append(names, typeName(q.typ))
	}
	return "cells above: " + strings.Join(names, ", ")
}

func typeName(t *cellType) string {
	if t == nil {
		return "untyped group"
	}
	return t.name
}
