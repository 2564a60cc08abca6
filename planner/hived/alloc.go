package hived

import (
	"fmt"
	"sort"

	"github.com/themis-nomad/themis/planner/core"
)

func errInternal(format string, args ...any) error {
	return fmt.Errorf("hived: internal error: "+format, args...)
}

// Allocate places a job's gang and records it.
//
// A guaranteed job (Priority >= 0) is placed in its VC's virtual cells as it
// would be in a private cluster made of them (see place.go); if it does not
// fit, lower-priority jobs of the same VC are preempted, lowest priority and
// newest first, keeping only those that must go. The virtual GPUs chosen are
// then bound to physical GPUs (binding the VC's cells on the way as needed),
// and opportunistic jobs on those GPUs are preempted.
//
// An opportunistic job (Priority < 0) is placed on idle healthy GPUs,
// preferring GPUs outside the VCs' bound cells; it preempts nothing.
//
// On error nothing changes; the error wraps ErrNoCapacity, ErrUnknownVC or
// ErrInvalidRequest and says why.
func (c *Cluster) Allocate(req Request) (Allocation, error) {
	if req.GPUs <= 0 {
		return Allocation{}, fmt.Errorf("hived: job %s: %w: asks for %d GPUs", req.Job, ErrInvalidRequest, req.GPUs)
	}
	if _, dup := c.jobs[req.Job]; dup {
		return Allocation{}, fmt.Errorf("hived: job %s: %w: it is already allocated", req.Job, ErrInvalidRequest)
	}
	if req.Priority < 0 {
		return c.allocOpportunistic(req)
	}
	v := c.vcByName[req.VC]
	if v == nil {
		return Allocation{}, fmt.Errorf("hived: job %s: %w %q", req.Job, ErrUnknownVC, req.VC)
	}
	return c.allocGuaranteed(v, req)
}

func (c *Cluster) newJob(req Request, v *vc) *job {
	c.seq++
	return &job{key: req.Job, vcName: req.VC, v: v, prio: req.Priority, seq: c.seq}
}

func (c *Cluster) allocOpportunistic(req Request) (Allocation, error) {
	for w := 0; w < 2; w++ {
		h := c.findHost(c.root, req.GPUs, w, req.SingleNode, c.caps)
		if h == nil {
			continue
		}
		j := c.newJob(req, nil)
		j.phys = c.fill(h, req.GPUs, w, c.caps, make([]*cell, 0, req.GPUs))
		for _, l := range j.phys {
			o := pleafState(l)
			l.job = j
			pchange(l, o)
		}
		c.jobs[j.key] = j
		return Allocation{Job: j.key, Grants: grants(j)}, nil
	}
	where := ""
	if req.SingleNode {
		where = " on one node"
	}
	return Allocation{}, fmt.Errorf("hived: opportunistic job %s: %w: %d GPUs%s asked, %d idle healthy GPUs in the cluster",
		req.Job, ErrNoCapacity, req.GPUs, where, c.root.avail[1])
}

func (c *Cluster) allocGuaranteed(v *vc, req Request) (Allocation, error) {
	k := req.GPUs
	if k > v.root.gpus {
		return Allocation{}, fmt.Errorf("hived: job %s: %w: asks for %d GPUs, vc %q owns %d", req.Job, ErrNoCapacity, k, v.name, v.root.gpus)
	}
	touched := c.touched[:0]
	defer func() { c.touched = touched[:0] }()
	for {
		leaves, preempt := c.planVirtual(v, k, req.Priority, req.SingleNode)
		if leaves == nil {
			err := c.noRoom(v, req)
			for _, l := range touched {
				c.settle(l)
			}
			return Allocation{}, err
		}
		// Bind the chosen virtual GPUs; one that lands on a bad GPU is
		// doomed, and the plan is made again without it.
		doomed := false
		for _, l := range leaves {
			if l.bound != nil {
				if !l.bound.healthy && l.job == nil { // a pinned GPU gone bad
					doom(l)
					doomed = true
				}
				continue
			}
			if err := c.ensureBound(l); err != nil {
				for _, t := range touched {
					c.settle(t)
				}
				return Allocation{}, err
			}
			touched = append(touched, l)
			if !l.bound.healthy {
				doom(l)
				doomed = true
			}
		}
		if doomed {
			continue
		}
		// Commit.
		j := c.newJob(req, v)
		var out []core.JobKey
		for _, pj := range preempt {
			out = append(out, pj.key)
			touched = c.removeJob(pj, touched)
		}
		j.virt = leaves
		j.phys = make([]*cell, len(leaves))
		for i, l := range leaves {
			p := l.bound
			if p.job != nil {
				if p.job.guaranteed() {
					return Allocation{}, errInternal("GPU %s of vc %q's cell is held by guaranteed job %s", p.name, v.name, p.job.key)
				}
				out = append(out, p.job.key)
				touched = c.removeJob(p.job, touched)
			}
			o := vleafState(l)
			l.job = j
			vchange(l, o)
			po := pleafState(p)
			p.job = j
			pchange(p, po)
			j.phys[i] = p
		}
		for _, l := range touched {
			c.settle(l)
		}
		c.jobs[j.key] = j
		v.jobs[j.key] = j
		sortKeys(out)
		return Allocation{Job: j.key, Grants: grants(j), Preempt: out}, nil
	}
}

// planVirtual chooses k virtual GPUs of v for a job of priority prio, and
// the jobs of v to preempt for them (nil leaves: no room). Leaves held by
// jobs to preempt are counted available only when their GPU is healthy.
func (c *Cluster) planVirtual(v *vc, k, prio int, single bool) ([]*cell, []*job) {
	if h := c.findHost(v.root, k, 0, single, v.caps); h != nil {
		return c.fill(h, k, 0, v.caps, make([]*cell, 0, k)), nil
	}
	var cands []*job
	for _, j := range v.jobs {
		if j.prio < prio {
			cands = append(cands, j)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	sort.Slice(cands, func(a, b int) bool {
		if cands[a].prio != cands[b].prio {
			return cands[a].prio < cands[b].prio
		}
		if ca, cb := c.jobCost(cands[a]), c.jobCost(cands[b]); ca != cb {
			return ca < cb // victims.go: the cheapest of a priority first
		}
		return cands[a].seq > cands[b].seq
	})
	fits := func() bool { return c.findHost(v.root, k, 0, single, v.caps) != nil }
	n := 0
	for n < len(cands) && !fits() {
		lend(cands[n], 1)
		n++
	}
	if !fits() {
		for _, j := range cands[:n] {
			lend(j, -1)
		}
		return nil, nil
	}
	// Keep the jobs that need not go, the most valuable first.
	var preempt []*job
	for i := n - 1; i >= 0; i-- {
		lend(cands[i], -1)
		if !fits() {
			lend(cands[i], 1)
			preempt = append(preempt, cands[i])
		}
	}
	h := c.findHost(v.root, k, 0, single, v.caps)
	leaves := c.fill(h, k, 0, v.caps, make([]*cell, 0, k))
	for _, j := range preempt {
		lend(j, -1)
	}
	return leaves, preempt
}

// lend counts (sign 1) or stops counting (-1) a job's virtual GPUs on
// healthy physical GPUs as available, to plan its preemption.
func lend(j *job, sign int) {
	for i, l := range j.virt {
		if !j.phys[i].healthy {
			continue
		}
		for x := l; x != nil; x = x.parent {
			x.avail[0] += sign
			x.avail[1] += sign
		}
	}
}

func (c *Cluster) noRoom(v *vc, req Request) error {
	where := "in one cell"
	if req.SingleNode {
		where = "on one node"
	}
	lower := 0
	for _, j := range v.jobs {
		if j.prio < req.Priority {
			lower += len(j.virt)
		}
	}
	msg := fmt.Sprintf("vc %q has %d free of its %d GPUs, not %d %s", v.name, v.root.avail[0], v.root.gpus, req.GPUs, where)
	if lower > 0 {
		msg += fmt.Sprintf(", even preempting its lower-priority jobs (%d GPUs)", lower)
	}
	if v.root.doomed > 0 {
		msg += fmt.Sprintf("; %d of its GPUs are lost to bad hardware", v.root.doomed)
	}
	return fmt.Errorf("hived: job %s: %w: %s", req.Job, ErrNoCapacity, msg)
}

// removeJob takes a job off its GPUs and appends its virtual GPUs (to
// settle) to touched.
func (c *Cluster) removeJob(j *job, touched []*cell) []*cell {
	for i, p := range j.phys {
		o := pleafState(p)
		p.job = nil
		pchange(p, o)
		if j.v != nil {
			l := j.virt[i]
			vo := vleafState(l)
			l.job = nil
			vchange(l, vo)
			touched = append(touched, l)
		}
	}
	delete(c.jobs, j.key)
	if j.v != nil {
		delete(j.v.jobs, j.key)
	}
	return touched
}

// Release frees a job's GPUs; it reports whether the job was allocated.
// Cells the job alone kept bound are unbound.
func (c *Cluster) Release(key core.JobKey) bool {
	j := c.jobs[key]
	if j == nil {
		return false
	}
	touched := c.removeJob(j, c.touched[:0])
	for _, l := range touched {
		c.settle(l)
	}
	c.touched = touched[:0]
	return true
}

// SetHealthy marks a GPU healthy or not. A bad GPU is given to no new job
// (a job already on it keeps it until released); cells are bound avoiding
// bad GPUs where they can (docs/hived.md, "What is guaranteed"). A doomed
// virtual GPU whose GPU is healthy again returns to its VC.
func (c *Cluster) SetHealthy(gpuID string, healthy bool) error {
	l := c.gpu(gpuID)
	if l == nil {
		return fmt.Errorf("hived: %w: unknown GPU %q", ErrInvalidRequest, gpuID)
	}
	if l.healthy == healthy {
		return nil
	}
	o := pleafState(l)
	l.healthy = healthy
	pchange(l, o)
	if inPoolCell(l) {
		if healthy {
			c.poolBad--
		} else {
			c.poolBad++
		}
	}
	switch v := l.bound; {
	case v == nil:
	case healthy && v.doomed > 0:
		undoom(v)
		c.settle(v)
	case !healthy && v.job == nil && v.doomed == 0:
		doom(v) // a pinned GPU of a VC
	}
	return nil
}

// Healthy reports whether a GPU is healthy (false for unknown GPUs).
func (c *Cluster) Healthy(gpuID string) bool {
	l := c.gpu(gpuID)
	return l != nil && l.healthy
}

// Free is the number of GPUs of a VC's cells that no job holds and that are
// not lost to bad hardware: what its guaranteed jobs can still get without
// preemption, if the gang's shape fits its cells.
func (c *Cluster) Free(vcName string) int {
	if v := c.vcByName[vcName]; v != nil {
		return v.root.avail[0]
	}
	return 0
}

// IdleGPUs is the number of healthy GPUs no job holds.
func (c *Cluster) IdleGPUs() int { return c.root.avail[1] }

// GPUs is the number of GPUs in the cluster.
func (c *Cluster) GPUs() int { return c.root.gpus }

// grantLess orders GPUs as the grants list them: by node, in topology
// order, then by index.
func grantLess(a, b *cell) bool {
	if a.node != b.node {
		return a.order < b.order
	}
	return a.gpuIndex < b.gpuIndex
}

// virtualGPUs names a guaranteed job's virtual GPUs in the order of its
// grants' GPUs (nil for an opportunistic job).
func (c *Cluster) virtualGPUs(j *job) []string {
	if j.virt == nil {
		return nil
	}
	pos := make([]int, len(j.phys))
	for i := range pos {
		pos[i] = i
	}
	sort.Slice(pos, func(a, b int) bool { return grantLess(j.phys[pos[a]], j.phys[pos[b]]) })
	out := make([]string, len(pos))
	for k, i := range pos {
		out[k] = c.vname(j.virt[i])
	}
	return out
}

// grants groups a job's GPUs by node, in topology order, GPU IDs by index.
func grants(j *job) []core.Grant {
	phys := append([]*cell(nil), j.phys...)
	sort.Slice(phys, func(a, b int) bool { return grantLess(phys[a], phys[b]) })
	var out []core.Grant
	for _, p := range phys {
		if n := len(out); n == 0 || out[n-1].Node != p.node {
			out = append(out, core.Grant{Job: j.key, Node: p.node})
		}
		g := &out[len(out)-1]
		g.GPUs = append(g.GPUs, p.name)
	}
	return out
}
