package core

import "slices"

// Preemptor is implemented by policies that make room for a waiting job by
// preempting running jobs of their choice, rather than by ranking: FitGpp
// and its baselines. The generic scheduler asks it when a queued job does
// not fit, preempts the victims one by one, and places the job as soon as
// it fits.
type Preemptor interface {
	// MakesRoom reports whether j may have running jobs preempted for it
	// (FitGpp: trial-and-error jobs).
	MakesRoom(j *Job) bool
	// Victim chooses the next job of running to preempt so that j fits,
	// or nil to stop (j then waits).
	Victim(j *Job, running []*Job, room *Room) *Job
}

// Room is what a Preemptor sees while it makes room: the running jobs, where
// they run, and what each node has free.
type Room struct {
	running []*Job
	grant   map[*Job]Grant
	free    *FreeGPUs
	victims VictimOrder
	tie     float64
}

// LeastLostWork reports whether the scheduler prefers, among victims the
// policy ranks equal, the one that loses the least work (victims.go).
func (r *Room) LeastLostWork() bool { return r.victims == LeastLostWork }

// Tie reports whether a policy's scores of two victims are equal, within
// the Scheduler's VictimTie (victims.go).
func (r *Room) Tie(a, b float64) bool { return victimTie(a, b, r.tie) }

func newRoom(ranked []*Job, grants []Grant, grantOf *grantIndex, free *FreeGPUs) *Room {
	r := &Room{grant: map[*Job]Grant{}, free: free}
	for _, j := range ranked {
		if j.Phase == Granted {
			r.running = append(r.running, j)
			r.grant[j] = grants[grantOf.of(j.Key)]
		}
	}
	return r
}

// make preempts victims until j can be placed, then places it.
func (r *Room) make(j *Job, c Capabilities, consolidate bool, preempts *[]Action) (Grant, bool) {
	return r.makeWith(j, c, func(v *Job) {
		g := r.grant[v]
		*preempts = append(*preempts, PreemptAction{Grant: g})
		r.free.give(g)
		r.free.charge(g, v, -1)
	}, func() (Grant, bool) { return r.free.PlaceJob(j, consolidate) })
}

// GangPreemptor is a Preemptor that, when no single victim makes room for
// j, may name several victims that together do (FitGpp, live, for a gang
// larger than a node: planner/policies/fitgpp_gang.go).
type GangPreemptor interface {
	// VictimSet chooses victims of running whose preemption together lets
	// j be placed, or nil (then nothing is preempted and j waits).
	VictimSet(j *Job, running []*Job, room *Room) []*Job
}

// makeWith has the policy choose victims for j one at a time, preempting
// each (preempt frees its GPUs), until place places j. When the policy
// names no single victim, a GangPreemptor may name a set, preempted at
// once.
func (r *Room) makeWith(j *Job, c Capabilities, preempt func(*Job), place func() (Grant, bool)) (Grant, bool) {
	pre := c.RoomMaker
	for {
		if v := pre.Victim(j, r.running, r); v != nil {
			if !r.remove(v) {
				return Grant{}, false // not a running job: a policy bug; preempt nothing more
			}
			preempt(v)
			if g, ok := place(); ok {
				return g, true
			}
			continue
		}
		gp := c.GangRoom
		if gp == nil {
			return Grant{}, false
		}
		vs := gp.VictimSet(j, r.running, r)
		if len(vs) == 0 || !r.allRunning(vs) {
			return Grant{}, false // nothing makes room, or a policy bug
		}
		for _, v := range vs {
			r.remove(v)
			preempt(v)
		}
		// The set was chosen to make room: if the job still cannot be
		// placed (a placer other than FreeGPUs.PlaceJob), stop here.
		return place()
	}
}

// allRunning reports whether every job of vs is a distinct running job.
func (r *Room) allRunning(vs []*Job) bool {
	seen := map[*Job]bool{}
	for _, v := range vs {
		if seen[v] || !slices.Contains(r.running, v) {
			return false
		}
		seen[v] = true
	}
	return true
}

// remove takes v out of the running jobs; false if it is not one.
func (r *Room) remove(v *Job) bool {
	for k, c := range r.running {
		if c == v {
			r.running = append(r.running[:k:k], r.running[k+1:]...)
			return true
		}
	}
	return false
}

// node is the indexed node a running job's grant is on, or -1 for a grant
// over several nodes (or an unknown one).
func (r *Room) node(v *Job) int {
	g, ok := r.grant[v]
	if !ok {
		return -1
	}
	if i, ok := r.free.x.byID[g.Node]; ok {
		return i
	}
	return -1
}

// FitsWith reports whether j would fit on running job v's node once v's
// GPUs, CPU and memory are free again (FitGpp's D_TE <= D_j + N).
//
// Live (equal parts), with multi-node gangs (a gang v spanning nodes, or a
// job j larger than v's node), it reports whether j could be placed once
// v's GPUs are free. (The simulator's FitGpp keeps the paper's one-node
// rule: a victim spanning nodes never makes room.)
func (r *Room) FitsWith(j, v *Job) bool {
	i := r.node(v)
	if r.free.equalParts && (i < 0 || j.GPUs > len(r.free.x.nodes[i].gpus)) {
		return r.FitsWithAll(j, []*Job{v})
	}
	if i < 0 {
		return false
	}
	f := r.free
	if f.count[i]+len(r.grant[v].GPUs) < j.GPUs {
		return false
	}
	if !f.demands(j) {
		return true
	}
	return j.CPU <= f.cpu[i]+v.CPU+1e-9 && j.Memory <= f.mem[i]+v.Memory+1e-9
}

// Share is a running job's demand relative to its node's capacity: GPUs,
// then CPU and memory where the node accounts them (FitGpp's D_j).
func (r *Room) Share(v *Job) []float64 {
	i := r.node(v)
	if i < 0 {
		return []float64{1}
	}
	n := r.free.x.nodes[i]
	out := []float64{float64(v.GPUs) / float64(max(1, len(n.gpus)))}
	if n.node.CPU > 0 {
		out = append(out, v.CPU/n.node.CPU)
	}
	if n.node.Memory > 0 {
		out = append(out, v.Memory/n.node.Memory)
	}
	return out
}
