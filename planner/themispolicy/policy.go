// Package themispolicy is the Themis arbiter (Mahajan et al., NSDI'20) as a
// policy of the planner's decision core: a core.Allocator that runs one
// round of planner/themis's partial-allocation auction (themis.Round) on
// every decision, and a core.RecheckAfter that asks for a decision when the
// next lease expires.
//
// # Apps and jobs
//
// The jobs that share core.Job.App are one app (a job without one is an app
// of its own). Each core job is a gang of exactly its GPUs; its work is
// counted in gang-seconds (themis.JobApp's convention: iter_time_serial =
// GPUs, iter_left = Remaining, iter_total = Work, or Remaining +
// Attained/GPUs when the job's whole work is not known). A
// job with LaterPhases > 0 belongs to a successive-halving sweep: the app's
// later phases are modelled by themis.Halving, each later phase's jobs doing
// twice the work of the previous phase's on twice the GPUs (Workload 2), up
// to the last phase's demand. The policy sees only the jobs the simulator
// has submitted (the current phase), so an app's T_id is estimated from
// them and their later phases.
//
// The app's slowdowns are its jobs' model's: 1 on one machine, core.Job.Skew
// across machines of a rack, core.Job.CrossRack across racks (the
// simulator's model classes). themis.lie scales one app's reported
// cross-machine and cross-rack slowdowns (Figure 18's strategic lying); its
// jobs still run at their true speed.
//
// Elapsed is the time since the policy first saw a job of the app; N_avg is
// the time-weighted number of apps with visible jobs since then
// (themis.Contention), updated at every decision.
//
// # Rounds and leases
//
// Each decision is a round (section 3.3.2): the offer is the free GPUs plus
// those of running jobs whose lease has expired, whose jobs are then
// queued again in their app's bid, each with the GPUs it ran on
// (themis.Job.Own: an app that does not bid keeps them when the auction
// leaves them whole). Winners hold their GPUs for c_i of the lease (but at
// least MinLeaseFraction of it), leftover grants for the whole lease (see
// planner/themis's doc).
// A job whose lease expired and whose app wins a gang that is exactly its
// GPUs keeps running (its lease renewed, no checkpoint); one whose app wins
// a gang elsewhere moves (preempted and granted in the same decision); one
// whose app wins nothing is preempted. Expired leases go to auction even
// when no job is queued: the best-placed GPUs then change hands, which is
// how apps that all want the one big machine (Figure 18) take turns on it,
// and how an app on spread GPUs gets a machine freed by another. (Renewing
// them silently instead left the first winner on that machine for good.)
//
// # Reservation for the worst-off app
//
// A large gang (Workload 2's last phases ask for up to 128 GPUs) can fit
// no offer while other apps keep winning the GPUs that free up a few at a
// time, and then it never runs; and an offer that holds it only spread
// gives it to the app spread (ρ_old assumes the worst placement, so any
// GPUs beat waiting). So when the app with the worst current ρ has a
// queued gang larger than the whole offer, or one that the offer holds only
// worse placed than the empty cluster could (on one machine, else in one
// rack) and that, by the app's own bid, would finish sooner waiting for the
// target than running so placed now, the policy reserves for it a target:
// the machine (else the rack) that will hold the gang soonest, counting
// the GPUs free or under expired leases now and those of running jobs as
// their leases end or they finish (target, releases). (The bid decides the
// wait: a reservation made for placement that the app does not want would
// delay the worst-off app for other apps' sake.) On the target, free GPUs stay
// free and expired leases end (their jobs are preempted) instead of being
// auctioned; the rest of the offer goes to a round among the other apps
// (the reserved-for app's own expired leases there are renewed). A gang
// that needs several racks has the whole cluster as its target: no round
// runs and every expired lease ends. Once the offer holds the gang as well
// placed as the empty cluster could, at most one lease later, the round
// runs with f = 1: the reserved-for app bids alone (the auction's winner
// takes what it values most, c_i = 1) and the rest goes to the others as
// leftovers. This is our addition: the paper's round-by-round filtering
// raises a losing app's ρ but does not say how a gang larger than any
// offer gets its GPUs.
//
// # No app left behind by lease timing
//
// With themis.revoke=on (the default), a newcomer that would wait past
// ρ = 1 for the next release has the best-off apps' leases ended early for
// its gang (revoke.go).
//
// Knobs: themis.f (fairness knob f, default 0.8), themis.lease (default
// 10m; a Go duration or seconds), themis.lie (APP:+X% or APP:-X%; default
// none), themis.revoke (on or off, default on; New leaves it off).
package themispolicy

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/themis"
)

// Name is the policy's name.
const Name = "themis"

// MinLeaseFraction is the shortest lease, as a fraction of the lease: an
// auction winner holds its GPUs for max(c_i, MinLeaseFraction) of the lease.
// c_i can be tiny (an app whose presence costs the others much), and a
// lease of milliseconds would only buy a checkpoint and a restore (30 s by
// default in the simulator) and make the next round come at once, again
// and again. 1/20 is 30 s of the default 10-minute lease.
const MinLeaseFraction = 1.0 / 20

// Policy is the Themis arbiter. It keeps state between rounds (leases, app
// arrivals, contention), so one Policy serves one simulation.
type Policy struct {
	// Fairness is f; Lease the lease in seconds.
	Fairness, Lease float64
	// Lie maps an app to the factor on its reported spread slowdowns'
	// excess over 1 (1.2: reports 20% more slowdown).
	Lie map[string]float64
	// Revoke ends the best-off apps' leases early for an app left behind
	// by lease timing (revoke.go; themis.revoke).
	Revoke bool

	leases map[core.JobKey]time.Time
	first  map[string]float64
	marks  map[string]themis.Mark
	cont   themis.Contention
	seed   uint64
	// reserving is the app the free GPUs are held for (see the package
	// doc), "" when none.
	reserving string
	// target is the machines the reservation gathers GPUs on (nil: all).
	target  map[string]bool
	rounds  uint64
	lastErr error
	// ran is the apps that have held GPUs (revoke.go: only the others are
	// newcomers).
	ran map[string]bool
}

// New returns a policy with f, lease (seconds) and the liars.
func New(f, lease float64, lie map[string]float64) *Policy {
	return &Policy{Fairness: f, Lease: lease, Lie: lie, leases: map[core.JobKey]time.Time{},
		first: map[string]float64{}, marks: map[string]themis.Mark{}, ran: map[string]bool{}}
}

// FromKnobs builds a policy from themis.f, themis.lease, themis.lie and
// themis.revoke.
func FromKnobs(k core.Knobs) (*Policy, error) {
	f, err := k.Float("themis.f", themis.DefaultFairness)
	if err != nil {
		return nil, err
	}
	if !(f >= 0 && f <= 1) {
		return nil, fmt.Errorf("themis.f = %v: want a number in [0, 1]", f)
	}
	lease := themis.DefaultLease
	if k.Has("themis.lease") {
		v := k.String("themis.lease", "")
		if d, err := time.ParseDuration(v); err == nil {
			lease = d.Seconds()
		} else if s, err := strconv.ParseFloat(v, 64); err == nil {
			lease = s
		} else {
			return nil, fmt.Errorf("themis.lease = %q: want a duration (10m) or seconds", v)
		}
		if !(lease > 0) || math.IsInf(lease, 0) {
			return nil, fmt.Errorf("themis.lease = %q: want a positive duration", v)
		}
	}
	lie := map[string]float64{}
	if k.Has("themis.lie") {
		for _, part := range strings.Split(k.String("themis.lie", ""), ",") {
			app, pct, ok := strings.Cut(strings.TrimSpace(part), ":")
			x, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(pct), "+"), "%"), 64)
			if !ok || app == "" || err != nil || !(x > -100) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("themis.lie = %q: want APP:+X%% or APP:-X%% (a finite X, below 100 when negative)", part)
			}
			lie[app] = 1 + x/100
		}
	}
	p := New(f, lease, lie)
	switch v := k.String("themis.revoke", "on"); v {
	case "on":
		p.Revoke = true
	case "off":
	default:
		return nil, fmt.Errorf("themis.revoke = %q: want on or off", v)
	}
	return p, nil
}

func (*Policy) Name() string { return Name }

// Rank orders the jobs FIFO; the auction, not the ranking, allocates.
func (*Policy) Rank(_ time.Time, jobs []*core.Job) { core.SortFIFO(jobs) }

// Preemptive: leases end and their GPUs are auctioned again. The simulator
// decides at every event for a preemptive policy.
func (*Policy) Preemptive() bool           { return true }
func (*Policy) Blocking() bool             { return false }
func (*Policy) Consolidate(*core.Job) bool { return false }
func (p *Policy) Seed(s int64)             { p.seed = uint64(s) }
func (p *Policy) Err() error               { return p.lastErr }
func secs(t time.Time) float64             { return float64(t.UnixNano()) / 1e9 }
func appOf(j *core.Job) string {
	if j.App != "" {
		return j.App
	}
	return j.Key.String()
}

// NextChange is the earliest lease expiry of a running job after now.
func (p *Policy) NextChange(now time.Time, jobs []*core.Job) time.Time {
	var next time.Time
	for _, j := range jobs {
		if j.Phase != core.Granted {
			continue
		}
		if e, ok := p.leases[j.Key]; ok && e.After(now) && (next.IsZero() || e.Before(next)) {
			next = e
		}
	}
	return next
}

// expired reports whether a lease ending at e is over at now (a
// millisecond of slack for the simulator's float clock).
func expired(e, now time.Time) bool { return !e.After(now.Add(time.Millisecond)) }

// Allocate runs one round (see the package doc).
func (p *Policy) Allocate(now time.Time, jobs []*core.Job, free *core.FreeGPUs, grants []core.Grant) ([]core.Grant, []core.JobKey) {
	t := secs(now)
	lease := time.Duration(p.Lease * float64(time.Second))
	grantOf := make(map[core.JobKey]core.Grant, len(grants))
	for _, g := range grants {
		grantOf[g.Job] = g
	}
	// Apps, contention, and which leases are over.
	leases := make(map[core.JobKey]time.Time, len(grants))
	byApp := map[string][]*core.Job{}
	var order []string
	queued := 0
	var expiredJobs []*core.Job
	for _, j := range jobs {
		a := appOf(j)
		if _, ok := byApp[a]; !ok {
			order = append(order, a)
		}
		byApp[a] = append(byApp[a], j)
		switch j.Phase {
		case core.Queued:
			queued++
		case core.Granted:
			p.ran[a] = true
			e, ok := p.leases[j.Key]
			if !ok {
				e = now.Add(lease) // granted outside this policy: a fresh lease
			}
			leases[j.Key] = e
			if expired(e, now) {
				expiredJobs = append(expiredJobs, j)
			}
		}
	}
	p.leases = leases
	p.cont.Set(t, len(order))
	for _, a := range order {
		if _, ok := p.first[a]; !ok {
			p.first[a] = t
			p.marks[a] = p.cont.Mark(t)
		}
	}
	if queued == 0 && len(expiredJobs) == 0 {
		return nil, nil
	}
	isExpired := make(map[core.JobKey]bool, len(expiredJobs))
	var extra []core.Grant
	for _, j := range expiredJobs {
		isExpired[j.Key] = true
		extra = append(extra, grantOf[j.Key])
	}
	offer := themis.OfferFromNodes(free.FreeNodes(extra...), nil)
	if offer.GPUs() == 0 && !p.Revoke {
		return nil, nil
	}
	env := themis.Env{ClusterGPUs: free.Capacity(), Lease: p.Lease}
	byID := map[string]*core.Job{}
	apps := make([]themis.App, 0, len(order))
	for _, a := range order {
		app, ok := p.app(a, byApp[a], t, free, grantOf, isExpired, byID)
		if ok {
			apps = append(apps, app)
		}
	}
	themis.SetFairShares(apps, env.ClusterGPUs)
	if p.Revoke {
		// No app left behind by lease timing (revoke.go): leases revoked
		// early join the offer as expired ones.
		if rv := p.revokeFor(now, jobs, apps, env, offer, grantOf, isExpired, free); len(rv) > 0 {
			again := map[string]bool{}
			for _, j := range rv {
				isExpired[j.Key] = true
				expiredJobs = append(expiredJobs, j)
				extra = append(extra, grantOf[j.Key])
				again[appOf(j)] = true
			}
			offer = themis.OfferFromNodes(free.FreeNodes(extra...), nil)
			for i := range apps {
				if again[apps[i].ID] {
					apps[i], _ = p.app(apps[i].ID, byApp[apps[i].ID], t, free, grantOf, isExpired, byID)
				}
			}
			themis.SetFairShares(apps, env.ClusterGPUs)
		}
	}
	if offer.GPUs() == 0 {
		return nil, nil
	}
	// Reservation for the worst-off app (see the package doc), by the
	// apps' current ρ with their max-min fair shares, as the round's filter.
	f := p.Fairness
	var ended []core.JobKey // leases ended for a reservation
	if w, need := worst(apps, env); w != "" {
		// Reserve until the offer holds the gang as well placed as the
		// empty cluster could.
		all := themis.OfferFromNodes(free.FreeNodes(grants...), nil)
		cls, ideal := bestClass(need, offer), bestClass(need, all)
		hold := need > offer.GPUs() || p.reserving == w && cls > ideal
		var tgt map[string]bool
		targeted := false
		if !hold && p.reserving != w && cls > ideal {
			// The offer holds the gang, but worse placed than the empty
			// cluster could: reserve if the app, by its own bid, finishes
			// sooner waiting for the target than running so now.
			var at float64
			tgt, at = target(need, all, offer, releases(now, jobs, grantOf, p.leases, isExpired, free))
			targeted = true
			a := &apps[slices.IndexFunc(apps, func(a themis.App) bool { return a.ID == w })]
			hold = a.SharedTime(need, cls) > a.SharedTime(need, ideal)+at
		}
		switch {
		case hold:
			if p.reserving != w {
				if !targeted {
					tgt, _ = target(need, all, offer, releases(now, jobs, grantOf, p.leases, isExpired, free))
				}
				p.reserving, p.target = w, tgt
			}
		case p.reserving == w:
			f = 1 // the app reserved for bids alone
			p.reserving, p.target = "", nil
		default:
			p.reserving, p.target = "", nil
		}
		if hold && p.target == nil {
			// Gathering a gang on the whole cluster: no round runs, free
			// GPUs stay free, and every expired lease ends.
			for _, j := range expiredJobs {
				ended = append(ended, j.Key)
				delete(p.leases, j.Key)
			}
			return nil, ended
		}
		if hold {
			// Gathering it on target machines: their free GPUs stay free
			// and their expired leases end; the app's own expired leases
			// elsewhere are renewed; the rest of the offer goes to a round
			// among the other apps.
			var left []*core.Job
			var extra []core.Grant
			for _, j := range expiredJobs {
				switch {
				case onMachines(free, grantOf[j.Key].GPUs, p.target):
					ended = append(ended, j.Key)
					delete(p.leases, j.Key)
				case appOf(j) == w:
					p.leases[j.Key] = now.Add(lease)
				default:
					left = append(left, j)
					extra = append(extra, grantOf[j.Key])
				}
			}
			expiredJobs = left
			offer = without(themis.OfferFromNodes(free.FreeNodes(extra...), nil), p.target)
			apps = slices.DeleteFunc(apps, func(a themis.App) bool { return a.ID == w })
			if offer.GPUs() == 0 || len(apps) == 0 {
				return nil, ended
			}
		}
	} else {
		p.reserving, p.target = "", nil
	}
	p.rounds++
	res, err := themis.Round(themis.RoundInput{Apps: apps, Offer: offer, Env: env, Fairness: f,
		Seed: p.seed*0x9e3779b97f4a7c15 + p.rounds})
	if err != nil {
		// A round that cannot run (a model the agents reject) keeps
		// everything as it is, leases renewed; Err reports it.
		p.lastErr = err
		for _, j := range expiredJobs {
			p.leases[j.Key] = now.Add(lease)
		}
		return nil, ended
	}
	var out []core.Grant
	stop := ended
	kept := map[core.JobKey]bool{}
	for _, aw := range res.Awards {
		d := time.Duration(max(aw.Lease, p.Lease*MinLeaseFraction) * float64(time.Second))
		// Gangs of this award, and the jobs they were meant for.
		type gang struct {
			job  *core.Job
			gpus []string
			used bool
		}
		var gs []*gang
		for _, jg := range aw.Jobs {
			if j := byID[jg.Job]; j != nil && len(jg.GPUs) == j.GPUs {
				gs = append(gs, &gang{job: j, gpus: jg.GPUs})
			}
		}
		// An expired job of the app keeps its GPUs when a gang of the award
		// is exactly them (any gang of its size: the app's own scheduler
		// chooses which of its jobs runs where).
		for _, j := range byApp[aw.App] {
			if !isExpired[j.Key] || kept[j.Key] {
				continue
			}
			for _, g := range gs {
				if !g.used && sameSet(g.gpus, grantOf[j.Key].GPUs) {
					g.used = true
					kept[j.Key] = true
					p.leases[j.Key] = now.Add(d)
					break
				}
			}
		}
		// The other gangs go to the award's jobs, in its order, skipping
		// those kept above; a kept job's own gang goes to the next job of
		// the same size that has none.
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
					for _, c := range byApp[aw.App] {
						if (c.Phase == core.Queued || isExpired[c.Key]) && !kept[c.Key] && !assigned[c.Key] && c.GPUs == len(g.gpus) {
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
			// restore elsewhere) unless stay keeps it in place below.
			out = append(out, core.Grant{Job: j.Key, Node: nodeOf(free, g.gpus), GPUs: g.gpus})
			p.leases[j.Key] = now.Add(d)
		}
	}
	out, idle := stay(out, res.Idle, isExpired, kept, grantOf, free)
	repack(out, idle, free)
	granted := make(map[core.JobKey]bool, len(out))
	for _, g := range out {
		granted[g.Job] = true
	}
	for _, j := range expiredJobs {
		switch {
		case kept[j.Key]:
		case granted[j.Key]:
			stop = append(stop, j.Key) // moves
		default:
			stop = append(stop, j.Key) // lost its lease
			delete(p.leases, j.Key)
		}
	}
	return out, stop
}

// app builds the themis.App of one app's visible jobs; ok is false when it
// has no work left to model.
func (p *Policy) app(id string, js []*core.Job, t float64, free *core.FreeGPUs, grantOf map[core.JobKey]core.Grant,
	isExpired map[core.JobKey]bool, byID map[string]*core.Job) (themis.App, bool) {
	a := themis.App{ID: id, Elapsed: max(0, t-p.first[id]), NAvg: p.cont.Average(p.marks[id], t)}
	sk, cr := 1.0, 1.0
	later, lastDemand := 0, 0
	var med []float64
	for _, j := range js {
		g := float64(j.GPUs)
		if j.GPUs < 1 || j.Remaining < 0 || j.GPUs > free.Capacity() {
			continue // unknown work, or a gang the cluster can never hold
		}
		sk, cr = max(sk, j.Skew), max(cr, j.CrossRack, j.Skew)
		// The job's total work: known, or else what it has left plus what it
		// has run (which overstates the total of a job that ran spread).
		tot := j.Work
		if !(tot >= j.Remaining) {
			tot = j.Remaining + max(0, j.Attained)/g
		}
		// A job with no work left (a zero-length job, or one finishing
		// now) still needs its gang to start and end: a millisecond.
		left := max(j.Remaining, 1e-3)
		tot = max(tot, left)
		jb := themis.Job{ID: j.Key.String(), IterTime: g, ItersLeft: left, ItersTotal: tot, Demand: j.GPUs, Gang: j.GPUs}
		switch {
		case j.Phase == core.Granted && !isExpired[j.Key]:
			jb.Held, jb.HeldClass = j.GPUs, classOf(free, grantOf[j.Key].GPUs)
		case isExpired[j.Key]:
			jb.Own = grantOf[j.Key].GPUs
		}
		byID[jb.ID] = j
		a.Jobs = append(a.Jobs, jb)
		if j.LaterPhases > later {
			later, lastDemand = j.LaterPhases, j.GPUs<<j.LaterPhases
		}
		med = append(med, tot)
	}
	if len(a.Jobs) == 0 {
		return a, false
	}
	sens := themis.Sensitivity{1, sk, cr}
	if x, ok := p.Lie[id]; ok {
		sens[1] = max(1, 1+(sens[1]-1)*x)
		sens[2] = max(sens[1], 1+(sens[2]-1)*x)
	}
	a.Sens = sens
	if later > 0 {
		// Later phases: each job runs as long as the current ones (their
		// median total) on twice the GPUs; in units of the median current
		// iteration time (the current gang), 2^q x that duration.
		sort.Float64s(med)
		d := med[len(med)/2]
		h := &themis.Halving{Demand: lastDemand}
		for q := 1; q <= later; q++ {
			h.Iters = append(h.Iters, d*float64(int(1)<<q))
		}
		a.Halving = h
	}
	return a, true
}

// classOf is the placement class of a set of GPUs.
func classOf(free *core.FreeGPUs, gpus []string) themis.Class {
	var node, rack string
	c := themis.SameMachine
	for i, id := range gpus {
		n, ok := free.Locate(id)
		if !ok {
			continue
		}
		if i == 0 || node == "" {
			node, rack = n.ID, n.Rack
			continue
		}
		if n.Rack != rack {
			return themis.CrossRack
		}
		if n.ID != node {
			c = themis.SameRack
		}
	}
	return c
}

// nodeOf is the grant's Node: the node of all its GPUs, or "" when they
// span several.
func nodeOf(free *core.FreeGPUs, gpus []string) string {
	node := ""
	for i, id := range gpus {
		n, ok := free.Locate(id)
		if !ok {
			return ""
		}
		if i == 0 {
			node = n.ID
		} else if n.ID != node {
			return ""
		}
	}
	return node
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]bool, len(a))
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}

// worst is the app with the worst current ρ (themis.App.CurrentRho) among those
// with a queued job the cluster can hold, and the GPUs its largest queued
// gang needs; "" when no app waits.
func worst(apps []themis.App, env themis.Env) (string, int) {
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
		if r := a.CurrentRho(env); r > rho || (r == rho && a.ID < id) {
			id, need, rho = a.ID, g, r
		}
	}
	return id, need
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

// target is where a reservation for a gang of need GPUs gathers them: the
// machine (when the gang fits one) or the rack (when it fits one) that will
// hold it soonest, by the GPUs available now (free or under expired
// leases) and then soon's releases on it; among equals the one with the
// most GPUs available now, then the smallest, then by ID; nil (anywhere)
// when the gang needs several racks. all is every GPU of the cluster,
// avail those available now; soon nil ranks by what is available now. at
// is how many seconds from now the target holds the gang, by soon.
func target(need int, all, avail themis.Offer, soon map[string][]release) (map[string]bool, float64) {
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
func bestClass(g int, o themis.Offer) themis.Class {
	racks := map[string]int{}
	c := themis.CrossRack
	for _, m := range o.Machines {
		if len(m.Free) >= g {
			return themis.SameMachine
		}
		racks[m.Rack] += len(m.Free)
		if racks[m.Rack] >= g {
			c = themis.SameRack
		}
	}
	return c
}

// without is the offer less the given machines.
func without(o themis.Offer, machines map[string]bool) themis.Offer {
	var out themis.Offer
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
