package arbiter

import (
	"sort"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// From the round's awards to grants: each award's gangs go to its app's
// jobs, a job whose lease expired keeps its own GPUs where it can (stay),
// and spread gangs move onto whole machines the round left idle (repack).

// awardGang is a gang of an award and the job it was meant for.
type awardGang struct {
	job  *core.Job
	gpus []string
	used bool
}

// grantAwards turns the round's awards into grants and new leases: an
// auction winner holds its GPUs for c_i of the lease (at least
// MinLeaseFraction of it), a leftover grant for the whole lease. kept is
// the expired jobs that stay on their own GPUs.
func (p *Policy) grantAwards(r *round, res auction.RoundResult) (grants []core.Grant, kept map[core.JobKey]bool) {
	kept = map[core.JobKey]bool{}
	for _, aw := range res.Awards {
		d := time.Duration(max(aw.Lease, p.Lease*MinLeaseFraction) * float64(time.Second))
		gs := awardGangs(r, aw)
		p.keepOwnGangs(r, aw.App, gs, kept, d)
		grants = p.assignGangs(r, aw.App, gs, kept, d, grants)
	}
	return grants, kept
}

// awardGangs is the gangs of an award, each with the job it was meant for.
func awardGangs(r *round, aw auction.Award) []*awardGang {
	var gs []*awardGang
	for _, jg := range aw.Jobs {
		if j := r.byID[jg.Job]; j != nil && len(jg.GPUs) == j.GPUs {
			gs = append(gs, &awardGang{job: j, gpus: jg.GPUs})
		}
	}
	return gs
}

// keepOwnGangs: an expired job of the app keeps its GPUs when a gang of the
// award is exactly them (any gang of its size: the app's own scheduler
// chooses which of its jobs runs where), with a lease of d.
func (p *Policy) keepOwnGangs(r *round, app string, gs []*awardGang, kept map[core.JobKey]bool, d time.Duration) {
	for _, j := range r.byApp[app] {
		if !r.isExpired[j.Key] || kept[j.Key] {
			continue
		}
		for _, g := range gs {
			if !g.used && sameSet(g.gpus, r.grantOf[j.Key].GPUs) {
				g.used = true
				kept[j.Key] = true
				p.leases[j.Key] = r.now.Add(d)
				break
			}
		}
	}
}

// assignGangs grants the award's other gangs to its jobs, in its order,
// skipping those kept; a kept job's own gang goes to the next job of the
// same size that has none. Each granted job gets a lease of d. It returns
// out with the grants appended.
func (p *Policy) assignGangs(r *round, app string, gs []*awardGang, kept map[core.JobKey]bool, d time.Duration, out []core.Grant) []core.Grant {
	assigned := map[core.JobKey]bool{}
	for _, g := range gs {
		if g.used {
			continue
		}
		j := g.job
		if kept[j.Key] || assigned[j.Key] {
			j = nil
			for _, c := range gs {
				if !kept[c.job.Key] && !assigned[c.job.Key] && c.job.GPUs == len(g.gpus) && !c.used {
					j = c.job
					break
				}
			}
			if j == nil {
				for _, c := range r.byApp[app] {
					if (c.Phase == core.Queued || r.isExpired[c.Key]) && !kept[c.Key] && !assigned[c.Key] && c.GPUs == len(g.gpus) {
						j = c
						break
					}
				}
			}
			if j == nil {
				continue
			}
		}
		g.used = true
		assigned[j.Key] = true
		// An expired job given a gang elsewhere moves (checkpoint,
		// restore elsewhere) unless stay keeps it in place.
		out = append(out, core.Grant{Job: j.Key, Node: nodeOf(r.free, g.gpus), GPUs: g.gpus})
		p.leases[j.Key] = r.now.Add(d)
	}
	return out
}

// stay keeps expired jobs on their own GPUs instead of moving them to the
// gangs the round gave them elsewhere: the auction picks concrete GPUs
// without knowing which ones a job already runs on, and a move costs a
// checkpoint and a restore. Two cases, both leaving every placement class
// as the round decided:
//
//   - Idle: the job's own GPUs are all left idle by the round and placed at
//     least as well as its new gang; it keeps them and the new gang goes
//     back to the idle GPUs.
//   - Swap: the job's own GPUs are exactly another grant's gang, of the same
//     placement class as the job's new gang; the two trade gangs, so the job
//     stays and the other job starts (or moves) as it would have, at the
//     same class.
//
// A job kept so has the lease of its award, already set. stay returns the
// grants left and the idle GPUs.
func stay(out []core.Grant, idle []string, isExpired, kept map[core.JobKey]bool, grantOf map[core.JobKey]core.Grant, free *core.FreeGPUs) ([]core.Grant, []string) {
	key := func(gpus []string) string {
		s := append([]string(nil), gpus...)
		sort.Strings(s)
		return strings.Join(s, ",")
	}
	// Swaps first: they free no GPUs.
	at := make(map[string]int, len(out))
	for i, g := range out {
		at[key(g.GPUs)] = i
	}
	drop := make([]bool, len(out))
	for i := range out {
		g := out[i]
		own := grantOf[g.Job].GPUs
		if !isExpired[g.Job] || len(own) != len(g.GPUs) {
			continue
		}
		j, ok := at[key(own)]
		if !ok || j == i || drop[j] || classOf(free, own) != classOf(free, g.GPUs) {
			continue
		}
		out[j].GPUs, out[j].Node = g.GPUs, g.Node
		at[key(g.GPUs)] = j
		delete(at, key(own))
		drop[i] = true
		kept[g.Job] = true
	}
	isIdle := make(map[string]bool, len(idle))
	for _, id := range idle {
		isIdle[id] = true
	}
	changed := false
	left := out[:0]
	for i, g := range out {
		if drop[i] {
			continue
		}
		own := grantOf[g.Job].GPUs
		if isExpired[g.Job] && sameSet(own, g.GPUs) {
			kept[g.Job] = true // swapped back onto its own GPUs
			continue
		}
		ok := isExpired[g.Job] && len(own) == len(g.GPUs) && classOf(free, own) <= classOf(free, g.GPUs)
		for _, id := range own {
			ok = ok && isIdle[id]
		}
		if !ok {
			left = append(left, g)
			continue
		}
		for _, id := range own {
			delete(isIdle, id)
		}
		for _, id := range g.GPUs {
			isIdle[id] = true
		}
		kept[g.Job] = true
		changed = true
	}
	if !changed {
		return left, idle
	}
	idle = idle[:0:0]
	for id := range isIdle {
		idle = append(idle, id)
	}
	sort.Strings(idle)
	return left, idle
}

// repack moves each granted gang that spans machines onto one machine when
// the GPUs nobody took (idle) include enough on one machine, best fit (the
// machine with the fewest such GPUs that holds the gang); the gang's old
// GPUs become idle in turn. An agent bids for its whole allocation at one
// placement class, so a multi-job app's gangs may be split across machines
// that the round left whole ones beside.
func repack(grants []core.Grant, idle []string, free *core.FreeGPUs) {
	if len(idle) == 0 {
		return
	}
	byNode := map[string][]string{}
	for _, id := range idle {
		if n, ok := free.Locate(id); ok {
			byNode[n.ID] = append(byNode[n.ID], id)
		}
	}
	for i := range grants {
		g := &grants[i]
		if g.Node != "" || len(g.GPUs) < 2 {
			continue
		}
		best := ""
		for n, ids := range byNode {
			if len(ids) >= len(g.GPUs) && (best == "" || len(ids) < len(byNode[best]) || (len(ids) == len(byNode[best]) && n < best)) {
				best = n
			}
		}
		if best == "" {
			continue
		}
		old := g.GPUs
		g.GPUs = append([]string(nil), byNode[best][:len(old)]...)
		byNode[best] = byNode[best][len(old):]
		g.Node = best
		for _, id := range old {
			if n, ok := free.Locate(id); ok {
				byNode[n.ID] = append(byNode[n.ID], id)
			}
		}
	}
}
