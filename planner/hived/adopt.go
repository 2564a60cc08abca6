package hived

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Adopt records a job that already runs on exactly the given GPUs. It is
// how a restarted planner replays the jobs that hold GPUs (as HiveD's
// AddAllocatedPod does): the planner rebuilds a Cluster with New from the
// nodes (with the GPUs' current health) and the VC config, then adopts
// every running job, in the order the jobs were first granted.
//
// A guaranteed job (req.Priority >= 0) takes free virtual GPUs of its VC
// bound to its GPUs, binding the VC's cells around them as needed, as long
// as the other VCs' unbound cells all stay placeable (the invariant
// Allocate keeps). With cells (the job's JobView.Cells, read with Job
// right after Allocate and recorded with the job: its virtual GPUs,
// parallel to gpus, in the grants' order of GPUs) it takes exactly those
// virtual GPUs, binding each cell above them to the physical cell above
// the GPU at the same height; the replay is then exact (but for virtual
// GPUs doomed to bad hardware, which no job carries: see docs/hived.md,
// "Replay"). With cells nil it
// chooses: under the VC's cell already bound around a GPU, else under one
// of the VC's unbound cells bound to a cell around the GPU (of the cells
// above the GPU the VC has an unbound cell of the type for: the one
// holding most of the job's GPUs, then the smallest), a free virtual cell
// of the type, the first in order. That keeps the VC's guarantee and the
// job's affinity, but not always the virtual cells the job had, so later
// decisions may differ (docs/hived.md, "Replay"). Cells recorded under
// another config may not name the VC's cells any more: Adopt then fails
// (ErrInvalidRequest, or ErrNoCapacity if they do not fit), and the caller
// may adopt the job without them.
//
// An opportunistic job (req.Priority < 0) just holds its GPUs, inside VCs'
// cells or not; cells must be nil.
//
// req.GPUs is the gang size: 0 or len(gpus). req.SingleNode is not
// checked. A GPU may be unhealthy: a job keeps a GPU that went bad until
// the caller releases it, and the replay records that.
//
// Seniority: each adopted job is newer than every job allocated or adopted
// before it (it gets the next sequence number, as Allocate does); among a
// VC's jobs of one priority Allocate preempts the newest first. Jobs
// adopted in the order they were first granted keep their relative
// seniority; the caller keeps that order with the job (e.g. its grant time
// or a counter in its lease).
//
// On error nothing changes; the error names the job and the GPU or VC, and
// wraps ErrInvalidRequest (no GPUs, a size mismatch, a job already
// allocated, an unknown, repeated or held GPU, a malformed or unknown
// virtual cell), ErrUnknownVC, or ErrNoCapacity (the VC has no free
// virtual cell there: the GPU lies in another VC's cell, the VC has no
// unbound cell of a type around it, or binding one would leave another
// VC's cells unplaceable; with cells: the virtual GPU is held, or its
// cells are bound elsewhere).
func (c *Cluster) Adopt(req Request, gpus, cells []string) error {
	if len(gpus) == 0 {
		return fmt.Errorf("hived: job %s: %w: adopts no GPUs", req.Job, ErrInvalidRequest)
	}
	if req.GPUs != 0 && req.GPUs != len(gpus) {
		return fmt.Errorf("hived: job %s: %w: asks for %d GPUs but runs on %d (%s)", req.Job, ErrInvalidRequest,
			req.GPUs, len(gpus), strings.Join(gpus, ", "))
	}
	if cells != nil && len(cells) != len(gpus) {
		return fmt.Errorf("hived: job %s: %w: %d virtual GPUs for %d GPUs", req.Job, ErrInvalidRequest, len(cells), len(gpus))
	}
	if cells != nil && req.Priority < 0 {
		return fmt.Errorf("hived: job %s: %w: an opportunistic job has no virtual GPUs", req.Job, ErrInvalidRequest)
	}
	j := &job{key: req.Job, vcName: req.VC, prio: req.Priority, seq: c.seq + 1}
	if err := c.adopt(j, gpus, cells); err != nil {
		return err
	}
	c.seq++
	return nil
}

// adopt records j (its key, VC, priority and sequence number set) on the
// GPUs of the given IDs, on the given virtual GPUs if any; on error it
// changes nothing.
func (c *Cluster) adopt(j *job, ids, cells []string) error {
	if _, dup := c.jobs[j.key]; dup {
		return fmt.Errorf("hived: job %s: %w: it is already allocated", j.key, ErrInvalidRequest)
	}
	phys := make([]*cell, len(ids))
	for i, id := range ids {
		q := c.gpu(id)
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
		var virt []*cell
		var err error
		if cells != nil {
			virt = make([]*cell, len(cells))
			for i, name := range cells {
				if virt[i], err = c.virtualGPU(v, name); err != nil {
					return fmt.Errorf("hived: job %s: %w: %v", j.key, ErrInvalidRequest, err)
				}
			}
			err = c.bindCells(v, phys, virt)
		} else {
			virt, err = c.bindAt(v, phys)
		}
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

// virtualGPU finds a virtual GPU of v by its name ("<vc>/<type>.<i>/...").
func (c *Cluster) virtualGPU(v *vc, name string) (*cell, error) {
	parts := strings.Split(name, "/")
	if parts[0] != v.name {
		return nil, fmt.Errorf("virtual GPU %q is not vc %q's", name, v.name)
	}
	x := v.root
	for _, part := range parts[1:] {
		dot := strings.LastIndexByte(part, '.')
		i, err := strconv.Atoi(part[dot+1:])
		if dot < 0 || err != nil || i < 0 || i >= len(x.children) || x.children[i].typ.name != part[:dot] {
			return nil, fmt.Errorf("vc %q has no virtual cell %q", v.name, name)
		}
		x = x.children[i]
	}
	if !x.isLeaf() {
		return nil, fmt.Errorf("virtual cell %q is not a GPU", name)
	}
	return x, nil
}

// bindCells binds the given virtual GPUs of v, and the cells above them, to
// the given physical GPUs and the cells above them at the same heights. On
// failure it undoes its bindings and says why.
func (c *Cluster) bindCells(v *vc, phys, virt []*cell) error {
	var binds []*cell
	fail := func(format string, args ...any) error {
		for i := len(binds) - 1; i >= 0; i-- {
			x := binds[i]
			if x.parent == v.root {
				c.unbindTop(x)
			} else {
				x.bound.bound, x.bound = nil, nil
			}
		}
		return fmt.Errorf(format, args...)
	}
	for i, p := range phys {
		l := virt[i]
		switch {
		case l.job != nil:
			return fail("virtual GPU %s (for GPU %s) is held by job %s", c.vname(l), p.name, l.job.key)
		case l.doomed > 0:
			return fail("virtual GPU %s (for GPU %s) is doomed to bad hardware", c.vname(l), p.name)
		}
		for x, q := l, p; ; x, q = x.parent, q.parent {
			switch {
			case q == nil || q.typ != x.typ:
				return fail("virtual cell %s (type %s) cannot be bound around GPU %s: no cell of its type above it", c.vname(x), x.typ.name, p.name)
			case x.bound == q:
			case x.bound != nil:
				return fail("virtual cell %s is bound to %s, not to %s around GPU %s", c.vname(x), x.bound.name, q.name, p.name)
			case q.bound != nil:
				return fail("cell %s around GPU %s is bound to vc %q's cell %s", q.name, p.name, q.bound.vc.name, c.vname(q.bound))
			case x.parent == v.root:
				if !c.takeCell(q) {
					return fail("cell %s around GPU %s is not free (another VC's cell lies in or around it)", q.name, p.name)
				}
				c.attachTop(x, q)
				binds = append(binds, x)
				if !c.feasible() {
					return fail("binding vc %q's cell %s to %s would leave other VCs' cells unplaceable", v.name, c.vname(x), q.name)
				}
			default:
				x.bound, q.bound = q, x
				binds = append(binds, x)
				continue
			}
			break
		}
	}
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
