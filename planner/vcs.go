package planner

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// Virtual clusters live (HiveD). The planner keeps no cell bindings in
// memory: every round it builds the cells from the nodes Nomad reports (the
// device plugin's fingerprints) and the VC config, then replays every lease
// in the order it was granted, with the virtual GPUs the lease recorded
// (hived.Cluster.Adopt, as HiveD replays allocated pods), so the bindings are
// those the running jobs were granted under, after a restart too. The
// decision core then places queued jobs with hived.Placer: guaranteed jobs
// in their VC's cells, opportunistic ones on idle cells, preempted (through
// the revoke path) when a guaranteed job needs their cells.

// placer builds this round's placer, nil without virtual clusters.
func (p *Planner) placer(r *round) (core.Placer, error) {
	if p.stack().Placement == stack.PlaceFree {
		return nil, nil
	}
	c, err := p.cells.of(p.stack(), r.snap.Nodes)
	if err != nil {
		return nil, fmt.Errorf("virtual clusters: %w", err)
	}
	h := hived.NewPlacer(c)
	h.SetEqualParts(true)
	ls := make([]lease.JobLease, 0, len(r.leases))
	for _, l := range r.leases {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b lease.JobLease) int {
		return cmp.Or(a.GrantedAt.Compare(b.GrantedAt), cmp.Compare(a.LeaseID, b.LeaseID))
	})
	for _, l := range ls {
		k := core.JobKey{Namespace: l.Namespace, ID: l.JobID}
		prio := hived.Opportunistic
		// A lease being revoked is replayed as opportunistic: its GPUs stay
		// taken, but its VC's cells are free for the job it is preempted
		// for (its GPUs look free to the core too, round.held).
		if j := r.jobs[k]; j != nil && j.Err == nil && !r.finished(j) && l.Revoke == nil {
			prio = j.Intent.Priority
		}
		req := hived.Request{Job: k, VC: l.VC, GPUs: len(l.GPUs), Priority: prio}
		if prio < 0 {
			l.Cells = nil
		}
		err := h.Cluster().Adopt(req, l.GPUs, l.Cells)
		if err == nil {
			continue
		}
		// The job no longer fits its VC's cells (the config changed, or
		// a GPU went away): it keeps its GPUs as an opportunistic job, so
		// no GPU is granted twice, and the next preemption of idle cells
		// may take them back.
		p.log.Warn("a running job does not fit its virtual cluster's cells; it keeps its GPUs as an opportunistic job", "job", k, "vc", l.VC, "gpus", l.GPUs, "error", err)
		req.Priority = hived.Opportunistic
		if err := h.Cluster().Adopt(req, l.GPUs, nil); err != nil {
			return nil, fmt.Errorf("virtual clusters: replay lease %s of %s: %w", l.LeaseID, k, err)
		}
	}
	r.vcs = h.Cluster()
	r.cells = func(k core.JobKey) []string {
		v, ok := h.Cluster().Job(k)
		if !ok {
			return nil
		}
		return v.Cells
	}
	return h, nil
}

// cellCache keeps the HiveD cells of the last round's nodes and VC
// config with no lease replayed. Building them (hived.New) names and
// indexes a cell for every GPU, socket, pair and node, and was half of a
// round's placer at 1,000 nodes; a round now replays its leases on a copy
// (hived.Cluster.Clone), which is the same cluster bit for bit
// (TestCloneEquivalence), and builds again only when the stack or any
// node (its GPUs, their paths or health, its rack or schedulability)
// changed.
type cellCache struct {
	st    *stack.Stack
	nodes []core.Node // a copy of what the cells were built from
	c     *hived.Cluster
}

// of is a fresh copy of the cells of st's VC config on nodes.
func (cc *cellCache) of(st *stack.Stack, nodes []core.Node) (*hived.Cluster, error) {
	if cc.c == nil || cc.st != st || !slices.EqualFunc(cc.nodes, nodes, sameNode) {
		c, err := st.NewLiveCells(nodes)
		if err != nil {
			cc.c = nil
			return nil, err
		}
		cc.st, cc.c = st, c
		cc.nodes = make([]core.Node, len(nodes))
		for i, n := range nodes {
			n.GPUs = slices.Clone(n.GPUs)
			for k := range n.GPUs {
				n.GPUs[k].Path = slices.Clone(n.GPUs[k].Path)
			}
			cc.nodes[i] = n
		}
	}
	return cc.c.Clone(), nil
}

// sameNode reports whether two nodes are the same in every field.
func sameNode(a, b core.Node) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Rack == b.Rack && a.Schedulable == b.Schedulable &&
		a.CPU == b.CPU && a.Memory == b.Memory && slices.EqualFunc(a.GPUs, b.GPUs, func(x, y core.GPU) bool {
		return x.ID == y.ID && x.Index == y.Index && x.Healthy == y.Healthy && slices.Equal(x.Path, y.Path)
	})
}

// tenancyError checks a job's claim on its virtual cluster, priority and
// class against its Nomad namespace's binding in the VC config
// (hived.Config.Admit; docs/hived.md): the stanza is its user's to write,
// the namespace is Nomad's. Without a VC config every claim stands, as
// before bindings.
func (p *Planner) tenancyError(j *nomad.Job) error {
	return p.stack().Tenants.Admit(j.Key.Namespace, j.Intent.VC, j.Intent.Priority, string(j.Intent.Class))
}

// graceError checks the grace period of a job that holds no lease against
// its VC's max_grace_period (hived.Config.AdmitGrace). A job already
// running under a larger one (a reload lowered the bound) is not rejected
// for it: its revoke waits for the bound only (graceOf).
func (p *Planner) graceError(j *nomad.Job, leased bool) error {
	if leased {
		return nil
	}
	return p.stack().Tenants.AdmitGrace(j.Intent.VC, j.Intent.GracePeriod)
}

// graceOf is how long the revoke path waits for job j (nil: purged) on
// lease l to checkpoint: its grace period, at most its VC's
// max_grace_period (hived.Config.GraceBound: a bound a reload lowered
// holds for the jobs already running too).
func (p *Planner) graceOf(j *nomad.Job, l lease.JobLease) time.Duration {
	if j == nil {
		return 0
	}
	grace := j.Intent.GracePeriod
	if max, _ := p.stack().Tenants.GraceBound(l.VC); max > 0 && grace > max {
		grace = max
	}
	return grace
}

// trusts reports whether the Themis filter may rank the job's app by the
// progress its jobs report: only where its namespace's binding says
// trust_progress = true (docs/themis.md); live, by default, not.
func (p *Planner) trusts(j *nomad.Job) bool {
	return p.stack().Tenants.TrustsProgress(j.Key.Namespace, j.Intent.VC)
}
