package arbiter

import (
	"math"
	"sort"
	"time"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
)

// Early lease end: no app left behind by lease timing (our addition).
// (Spelt "revoke" before #34, as in the knobs' old names; it is no live
// preemption: the leases it ends join the round's offer, and the jobs bid
// again as at any lease end.)
//
// Themis reallocates only at lease ends, so an app that arrives when every
// GPU is held waits for the next lease end however badly off that makes
// it: at four times Workload 2's load a 13-second job on 2 GPUs (T_id 63 s)
// waited 100 s for one and finished at ρ 1.79. The rule bounds that wait.
// At a round, a newcomer (an app that has never held GPUs) whose queued
// gang the offer cannot hold is left behind when, waiting for the GPUs that running jobs
// release (lease ends and finishes, as the reservation's releases), it
// would reach ρ > 1 at its fair share (auction.App.CurrentRhoAfter) and that
// wait is longer than MinLeaseFraction of a lease (1 is themis.early_end_rho,
// the target: any value in (0, 1]). Then the leases of the
// best-off apps' running jobs end early, enough GPUs for its gang, and the
// round runs on the larger offer as at any lease end: the cut jobs bid
// again (one that wins back its own GPUs keeps running, no checkpoint), the
// left-behind app bids with the worst current ρ.
//
// A job's lease is cut short only if its app, made to wait a whole lease for that
// job's GPUs, still reaches ρ <= 1 (CurrentRho with the job queued; with
// themis.early_end_victim=target, ρ <= the target instead), and below the
// left-behind app's; the best-off apps by that measure go first,
// preferring one machine that then holds the gang, else across machines.
// Among those, the machine that then holds the gang with the fewest GPUs
// cut is chosen (the cut jobs pay a checkpoint and a restore), and
// on it the best-off apps' jobs go first. Jobs still restoring from a
// checkpoint are never cut. Every ρ here
// is at the ideal placement, as the filter's, so nothing an app reports
// about its placement changes whether or whose leases end: a liar can
// trigger no early end and shield no job (Figure 18 re-run with the rule).
// Themis still ends leases early for at most one app per round, and only
// for a newcomer: an app whose job was cut, or that ran before (a later
// phase of a sweep), waits for lease ends as before, so early ends do
// not cascade (with every app that held nothing eligible, Workload 2 at
// four times the load had five times the preemptions and 5% more GPU
// time).

// endEarly is Allocate's early-end step (themis.early_end): the
// leases earlyEndFor ends join the offer as expired ones, and their apps'
// models and every fair share are made anew. When it ends none, calm is
// how many seconds at least pass, with only the clock moving, before it
// could (earlyEndFor); 0 when it ends some.
func (p *Policy) endEarly(r *round) (calm float64) {
	rv, calm := p.earlyEndFor(r.now, r.jobs, r.apps, r.env, r.offer, r.grantOf, r.isExpired, r.free)
	if len(rv) == 0 {
		return calm
	}
	again := map[string]bool{}
	for _, j := range rv {
		r.isExpired[j.Key] = true
		r.expiredJobs = append(r.expiredJobs, j)
		r.extra = append(r.extra, r.grantOf[j.Key])
		again[appOf(j)] = true
	}
	r.offer = auction.OfferFromNodes(r.free.FreeNodes(r.extra...), nil)
	for i := range r.apps {
		if again[r.apps[i].ID] {
			r.apps[i], _ = p.app(r.apps[i].ID, r.byApp[r.apps[i].ID], r.t, r.free, r.grantOf, r.isExpired, r.byID)
		}
	}
	auction.SetFairShares(r.apps, r.env.ClusterGPUs)
	if p.filtering(r) {
		p.filterBy(r) // the rebuilt apps' filter ρ, on the new fair shares
	}
	return 0
}

// leftBehind is the newcomer (not in ran) that has a queued gang (need
// GPUs) the offer cannot hold and, waiting for releases, would reach ρ >
// target (themis.early_end_rho) after more than the bound; the worst such by
// ρ. "" when none. calm is how many seconds at least must pass, with
// nothing but the clock moving, before a newcomer not left behind now can
// be (calmFor); +Inf when none can.
func leftBehind(apps []auction.App, ran map[string]bool, env auction.Env, offered int, rel map[string][]release, bound, target float64, active int) (id string, need int, rho, calm float64) {
	calm = math.Inf(1)
	var soon []release
	for _, rs := range rel {
		soon = append(soon, rs...)
	}
	sort.Slice(soon, func(a, b int) bool { return soon[a].t < soon[b].t })
	waitFor := func(g int) float64 {
		n := offered
		for _, r := range soon {
			if n += r.gpus; n >= g {
				return r.t
			}
		}
		return math.Inf(1)
	}
	for i := range apps {
		a := &apps[i]
		if ran[a.ID] {
			continue
		}
		g, held := 0, 0
		for _, j := range a.Jobs {
			held += j.Held
			if j.Held == 0 {
				g = max(g, j.Gang, 1)
			}
		}
		if held > 0 || g == 0 || g <= offered || g > env.ClusterGPUs {
			continue
		}
		w := waitFor(g)
		if !(w > bound) {
			continue
		}
		if math.IsInf(w, 1) {
			w = env.Lease
		}
		r := a.CurrentRhoAfter(env, w)
		switch {
		case r > target:
			if r > rho || r == rho && a.ID < id {
				id, need, rho = a.ID, g, r
			}
		default:
			calm = min(calm, calmFor(a, env, r, target, active))
		}
	}
	return id, need, rho, calm
}

// calmFor is how many seconds at least pass before newcomer a, at ρ r <=
// target now after its wait for releases, can reach ρ > target, with
// nothing but the clock moving (active apps, as now): ρ is (T_sh + wait) /
// T_id. T_sh is its elapsed time, which grows with the clock, and its
// queued work on its fair share, which the clock does not change (the
// share counts demands). The wait is for the running jobs' releases, each
// at its lease end or when it finishes, which near with the clock: it
// only shortens (a job that reports no progress releases at once, for
// this wait). So the numerator grows by at most the time that passes. T_id
// is its work over its demand times N_avg, and N_avg moves from where it
// is towards the apps active now, so T_id is never below its value with
// N_avg the lesser of the two. 0 when that cannot be said (no fair share
// set, a ρ that is not a number).
func calmFor(a *auction.App, env auction.Env, r, target float64, active int) float64 {
	if !(a.FairShare > 0) {
		return 0
	}
	tid := a.IdealTime(env.ClusterGPUs)
	least := tid / max(1, a.NAvg) * max(1, min(a.NAvg, float64(active)))
	c := target*least - r*tid
	if !(c > 0) || math.IsInf(c, 1) {
		return 0
	}
	return c
}

// endable is a running job whose lease may end early, with its app's ρ
// if it waits a whole lease for the job's GPUs and where the job's GPUs
// are.
type endable struct {
	job *core.Job
	rho float64
	on  map[string]int // GPUs per machine
}

// endable lists the running jobs whose leases may end early for an app
// at ρ worse: not restoring, lease not yet over, and their app still at
// ρ <= p.EarlyEndVictim (and below worse) if it waits a whole lease for the job's GPUs;
// best-off first.
func (p *Policy) endable(jobs []*core.Job, apps []auction.App, env auction.Env, grantOf map[core.JobKey]core.Grant,
	isExpired map[core.JobKey]bool, free *core.FreeGPUs, worse float64) []endable {
	stay := p.EarlyEndVictim
	appAt := make(map[string]int, len(apps))
	for i := range apps {
		appAt[apps[i].ID] = i
	}
	var out []endable
	for _, j := range jobs {
		if j.Phase != core.Granted || isExpired[j.Key] || j.RestoreLeft > 0 {
			continue
		}
		i, ok := appAt[appOf(j)]
		if !ok {
			continue
		}
		a := apps[i]
		a.Jobs = append([]auction.Job(nil), a.Jobs...)
		id := j.Key.String()
		found := false
		for k := range a.Jobs {
			if a.Jobs[k].ID == id {
				a.Jobs[k].Held, a.Jobs[k].HeldClass = 0, auction.SameMachine
				found = true
			}
		}
		if !found {
			continue
		}
		r := a.CurrentRho(env)
		if !(r <= stay && r < worse) {
			continue
		}
		on := map[string]int{}
		for _, g := range grantOf[j.Key].GPUs {
			if n, ok := free.Locate(g); ok {
				on[n.ID]++
			}
		}
		out = append(out, endable{job: j, rho: r, on: on})
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].rho != out[b].rho {
			return out[a].rho < out[b].rho
		}
		return out[a].job.Key.String() < out[b].job.Key.String()
	})
	return out
}

// chooseEnded picks, from the candidates (best-off first), jobs whose GPUs
// with the offer's give a gang of need: on one machine when some machine
// can be made to hold it (the one needing the fewest GPUs cut, then
// whose worst cut app is best off), else the best-off jobs anywhere
// until the offer holds need GPUs. nil when even all candidates are not
// enough.
func chooseEnded(need int, offer auction.Offer, cands []endable) []*core.Job {
	freeOn := map[string]int{}
	total := 0
	for _, m := range offer.Machines {
		freeOn[m.ID] += len(m.Free)
		total += len(m.Free)
	}
	// One machine: take its candidates best-off first until it holds need.
	type pick struct {
		jobs  []*core.Job
		worst float64
		gpus  int
	}
	var best *pick
	machines := map[string]bool{}
	for _, c := range cands {
		for m := range c.on {
			machines[m] = true
		}
	}
	ids := make([]string, 0, len(machines))
	for m := range machines {
		ids = append(ids, m)
	}
	sort.Strings(ids)
	for _, m := range ids {
		// The fewest GPUs cut on m: its candidates smallest first
		// (best-off first among equals) until m holds the gang.
		var on []endable
		for _, c := range cands {
			if len(c.on) == 1 && c.on[m] > 0 { // a job spanning machines frees no whole gang here
				on = append(on, c)
			}
		}
		sort.SliceStable(on, func(a, b int) bool { return on[a].on[m] < on[b].on[m] })
		have := freeOn[m]
		pk := &pick{}
		for _, c := range on {
			if have >= need {
				break
			}
			have += c.on[m]
			pk.gpus += c.on[m]
			pk.jobs = append(pk.jobs, c.job)
			pk.worst = max(pk.worst, c.rho)
		}
		if have >= need && (best == nil || pk.gpus < best.gpus || pk.gpus == best.gpus && pk.worst < best.worst) {
			best = pk
		}
	}
	if best != nil {
		return best.jobs
	}
	var out []*core.Job
	for _, c := range cands {
		if total >= need {
			break
		}
		for _, k := range c.on {
			total += k
		}
		out = append(out, c.job)
	}
	if total < need {
		return nil
	}
	return out
}

// earlyEndFor ends leases early for the app left behind (see above), if any:
// the jobs it cuts, whose leases it marks over. The caller adds them to
// the round's offer. When it ends none, calm is how many seconds at least
// pass before it could with only the clock moving: leftBehind's while no
// app is left behind; 0 when one is but no lease can end for it (which
// jobs may be cut moves with the clock).
func (p *Policy) earlyEndFor(now time.Time, jobs []*core.Job, apps []auction.App, env auction.Env, offer auction.Offer,
	grantOf map[core.JobKey]core.Grant, isExpired map[core.JobKey]bool, free *core.FreeGPUs) (ended []*core.Job, calm float64) {
	rel := releases(now, jobs, grantOf, p.leases, isExpired, free)
	id, need, rho, calm := leftBehind(apps, p.ran, env, offer.GPUs(), rel, p.Lease*MinLeaseFraction, p.EarlyEndRho, p.cont.State().N)
	if id == "" {
		return nil, calm
	}
	out := chooseEnded(need, offer, p.endable(jobs, apps, env, grantOf, isExpired, free, rho))
	for _, j := range out {
		p.leases[j.Key] = now // over now: it bids again in this round
	}
	return out, 0
}
