package arbiter

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// The reservation for the worst-off app (docs/themis-results.md,
// "Reservation for the worst-off app"): GPUs held for a large gang until
// the offer holds it as well placed as the empty cluster could.

// reserve is Allocate's reservation step, by the apps' current ρ with
// their max-min fair shares, as the round's filter. It reports whether a
// round runs: not when the reservation gathers a gang on the whole
// cluster, nor when the target takes the whole offer or no other app is
// left. When it reserves on target machines, their free GPUs stay free
// and their expired leases end, and the rest of the offer goes to a round
// among the other apps; once the reserved-for app's gang can be placed,
// it bids alone (f = 1).
func (p *Policy) reserve(r *round) bool {
	// An app whose progress is not trusted is the worst off by its as-run
	// ρ, as the filter ranks it (filter.go), not by what it claims.
	w, need := worst(r.apps, r.env, p.estimating() || len(r.untrusted) > 0)
	if w == "" {
		p.reserving, p.target = "", nil
		return true
	}
	if !p.holdFor(r, w, need) {
		return true
	}
	if p.target == nil {
		p.gatherOnCluster(r)
		return false
	}
	return p.gatherOnTarget(r, w)
}

// holdFor decides whether GPUs are held for app w's gang of need GPUs:
// when the offer cannot hold it, or while it is reserved for and the offer
// holds it only worse placed than the empty cluster could, or when the
// offer holds it so and the app, by its own bid, finishes sooner waiting
// for the target than running so placed now. It starts a reservation
// (p.reserving, p.target) or ends one; when the reserved-for app's gang
// can now be placed well, the round runs with f = 1.
func (p *Policy) holdFor(r *round, w string, need int) bool {
	// Reserve until the offer holds the gang as well placed as the
	// empty cluster could.
	all := auction.OfferFromNodes(r.free.FreeNodes(r.held...), nil)
	cls, ideal := bestClass(need, r.offer), bestClass(need, all)
	hold := need > r.offer.GPUs() || p.reserving == w && cls > ideal
	var tgt map[string]bool
	targeted := false
	if !hold && p.reserving != w && cls > ideal {
		// The offer holds the gang, but worse placed than the empty
		// cluster could: reserve if the app, by its own bid, finishes
		// sooner waiting for the target than running so now.
		var at float64
		tgt, at = target(need, all, r.offer, releases(r.now, r.jobs, r.grantOf, p.leases, r.isExpired, r.free))
		targeted = true
		a := &r.apps[slices.IndexFunc(r.apps, func(a auction.App) bool { return a.ID == w })]
		hold = a.SharedTime(need, cls) > a.SharedTime(need, ideal)+at
	}
	switch {
	case hold:
		if p.reserving != w {
			if !targeted {
				tgt, _ = target(need, all, r.offer, releases(r.now, r.jobs, r.grantOf, p.leases, r.isExpired, r.free))
			}
			p.reserving, p.target = w, tgt
		}
	case p.reserving == w:
		r.f = 1 // the app reserved for bids alone
		p.reserving, p.target = "", nil
	default:
		p.reserving, p.target = "", nil
	}
	return hold
}

// gatherOnCluster gathers a gang on the whole cluster: no round runs, free
// GPUs stay free, and every expired lease ends.
func (p *Policy) gatherOnCluster(r *round) {
	for _, j := range r.expiredJobs {
		r.ended = append(r.ended, j.Key)
		delete(p.leases, j.Key)
	}
}

// gatherOnTarget gathers app w's gang on the target machines: their free
// GPUs stay free and their expired leases end; the app's own expired
// leases elsewhere are renewed; the rest of the offer goes to a round
// among the other apps. It reports whether that round has GPUs and apps.
func (p *Policy) gatherOnTarget(r *round, w string) bool {
	var left []*core.Job
	var extra []core.Grant
	for _, j := range r.expiredJobs {
		switch {
		case onMachines(r.free, r.grantOf[j.Key].GPUs, p.target):
			r.ended = append(r.ended, j.Key)
			delete(p.leases, j.Key)
		case appOf(j) == w:
			p.leases[j.Key] = r.now.Add(r.lease)
		default:
			left = append(left, j)
			extra = append(extra, r.grantOf[j.Key])
		}
	}
	r.expiredJobs = left
	r.offer = without(auction.OfferFromNodes(r.free.FreeNodes(extra...), nil), p.target)
	r.apps = slices.DeleteFunc(r.apps, func(a auction.App) bool { return a.ID == w })
	return r.offer.GPUs() > 0 && len(r.apps) > 0
}

// worst is the app with the worst current ρ (auction.App.CurrentRho; with
// filter set, the filter's estimate, App.FilterRho, where there is one:
// themis.filter_estimate, or an app ranked as-run for its untrusted
// progress) among those with a queued job the cluster can
// hold, and the GPUs its largest queued gang needs; "" when no app waits.
func worst(apps []auction.App, env auction.Env, filter bool) (string, int) {
	id, need, rho := "", 0, math.Inf(-1)
	for i := range apps {
		a := &apps[i]
		g := 0
		for _, j := range a.Jobs {
			if j.Held == 0 {
				g = max(g, j.Gang, 1)
			}
		}
		if g == 0 || g > env.ClusterGPUs {
			continue
		}
		r := a.CurrentRho(env)
		if filter && a.FilterRho > 0 {
			r = a.FilterRho
		}
		if r > rho || (r == rho && a.ID < id) {
			id, need, rho = a.ID, g, r
		}
	}
	return id, need
}

// target is where a reservation for a gang of need GPUs gathers them: the
// machine (when the gang fits one) or the rack (when it fits one) that will
// hold it soonest, by the GPUs available now (free or under expired
// leases) and then soon's releases on it; among equals the one with the
// most GPUs available now, then the smallest, then by ID; nil (anywhere)
// when the gang needs several racks. all is every GPU of the cluster,
// avail those available now; soon nil ranks by what is available now. at
// is how many seconds from now the target holds the gang, by soon.
func target(need int, all, avail auction.Offer, soon map[string][]release) (map[string]bool, float64) {
	now := map[string]int{}
	for _, m := range avail.Machines {
		now[m.ID] += len(m.Free)
	}
	type group struct {
		id         string
		size, have int
		machines   []string
		at         float64 // when it would hold the gang
	}
	var machines, racks []*group
	byRack := map[string]*group{}
	for _, m := range all.Machines {
		machines = append(machines, &group{id: m.ID, size: len(m.Free), have: now[m.ID], machines: []string{m.ID}})
		r := byRack[m.Rack]
		if r == nil {
			r = &group{id: m.Rack}
			byRack[m.Rack] = r
			racks = append(racks, r)
		}
		r.size += len(m.Free)
		r.have += now[m.ID]
		r.machines = append(r.machines, m.ID)
	}
	for _, gs := range [][]*group{machines, racks} {
		for _, g := range gs {
			if soon == nil || g.have >= need {
				continue
			}
			var rs []release
			for _, m := range g.machines {
				rs = append(rs, soon[m]...)
			}
			sort.Slice(rs, func(a, b int) bool { return rs[a].t < rs[b].t })
			g.at = math.Inf(1)
			for n, i := g.have, 0; i < len(rs); i++ {
				if n += rs[i].gpus; n >= need {
					g.at = rs[i].t
					break
				}
			}
		}
		var best *group
		for _, g := range gs {
			if g.size < need {
				continue
			}
			if best == nil || g.at < best.at || g.at == best.at && (g.have > best.have || (g.have == best.have && (g.size < best.size || (g.size == best.size && g.id < best.id)))) {
				best = g
			}
		}
		if best != nil {
			out := map[string]bool{}
			for _, m := range best.machines {
				out[m] = true
			}
			return out, best.at
		}
	}
	return nil, 0
}

// onMachines reports whether any of the GPUs is on one of the machines.
func onMachines(free *core.FreeGPUs, gpus []string, machines map[string]bool) bool {
	for _, id := range gpus {
		if n, ok := free.Locate(id); ok && machines[n.ID] {
			return true
		}
	}
	return false
}

// bestClass is the best placement class an offer can hold a gang of g GPUs
// in.
func bestClass(g int, o auction.Offer) auction.Class {
	racks := map[string]int{}
	c := auction.CrossRack
	for _, m := range o.Machines {
		if len(m.Free) >= g {
			return auction.SameMachine
		}
		racks[m.Rack] += len(m.Free)
		if racks[m.Rack] >= g {
			c = auction.SameRack
		}
	}
	return c
}

// without is the offer less the given machines.
func without(o auction.Offer, machines map[string]bool) auction.Offer {
	var out auction.Offer
	for _, m := range o.Machines {
		if !machines[m.ID] {
			out.Machines = append(out.Machines, m)
		}
	}
	return out
}

// release is GPUs of a machine that a running job gives back at t: when its
// lease ends or, sooner, when it finishes.
type release struct {
	t    float64
	gpus int
}

// releases lists, per machine, when the running jobs whose leases have not
// expired give their GPUs back.
func releases(now time.Time, jobs []*core.Job, grantOf map[core.JobKey]core.Grant, leases map[core.JobKey]time.Time, isExpired map[core.JobKey]bool, free *core.FreeGPUs) map[string][]release {
	out := map[string][]release{}
	for _, j := range jobs {
		e, ok := leases[j.Key]
		if j.Phase != core.Granted || isExpired[j.Key] || !ok {
			continue
		}
		t := min(e.Sub(now).Seconds(), max(j.Remaining, 0))
		on := map[string]int{}
		for _, g := range grantOf[j.Key].GPUs {
			if n, ok := free.Locate(g); ok {
				on[n.ID]++
			}
		}
		for n, k := range on {
			out[n] = append(out[n], release{t, k})
		}
	}
	return out
}
