package policies

import (
	"cmp"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// App-level baselines: the Themis paper's baselines as it ran them
// (section 6.1): "on any resource availability, all apps report their
// <metric> and we allocate the resource to apps that have the least
// <metric>". The job-level las, srtf and srsf rank each job on its own; a
// hyper-parameter sweep of 16 jobs then counts as 16 small jobs. These rank
// every job by its whole app's metric (the app's jobs together, ties and
// order inside an app by the job's own metric, then FIFO), preemptive and
// re-ranked at every decision like the job-level ones, consolidated.
//
//   - app-las: least GPU service attained by the app so far, its finished
//     jobs included ("all apps report their service metric and we allocate
//     the resource to apps that have the least GPU service").
//   - app-srtf: least remaining time of the app: its slowest current job's
//     remaining time, plus one job's duration for each successive-halving
//     phase still to come (each phase runs as long as the current one).
//   - app-srsf: least remaining service of the app: its current jobs'
//     remaining GPU-seconds, plus the current phase's whole GPU-seconds for
//     each phase still to come (half the jobs on twice the GPUs).
//
// The remaining-time metrics are oracles (Job.Remaining, as srtf and srsf).
// A job is its own app when Job.App is empty.
type AppRanked struct {
	name string
	// app is the app's metric from its current jobs (and, for app-las, the
	// service of its jobs that are gone); job orders jobs inside an app.
	app func(s *appStat) float64
	job func(j *core.Job) float64

	// Service bookkeeping for app-las: what each job had attained when
	// last seen, and the service of the app's jobs no longer active.
	seen    map[core.JobKey]seenJob
	gone    map[string]float64
	lastNow time.Time
	round   uint64
}

type seenJob struct {
	app      string
	attained float64
	rate     float64 // GPUs while running, else 0
	remain   float64 // known remaining time (+Inf when unknown)
	round    uint64
}

// appStat is what an app's current jobs add up to.
type appStat struct {
	attained    float64 // GPU-seconds attained by current jobs
	gone        float64 // by jobs no longer active
	maxRemain   float64 // slowest current job's remaining time
	service     float64 // current jobs' remaining GPU-seconds
	phaseTime   float64 // longest current job's duration (attained/GPUs + remaining)
	phaseWork   float64 // current jobs' whole GPU-seconds
	laterPhases int
}

// NewAppLAS, NewAppSRTF and NewAppSRSF return the app-level baselines.
func NewAppLAS() *AppRanked {
	return &AppRanked{name: "app-las",
		app:  func(s *appStat) float64 { return s.gone + s.attained },
		job:  func(j *core.Job) float64 { return j.Attained },
		seen: map[core.JobKey]seenJob{}, gone: map[string]float64{}}
}

func NewAppSRTF() *AppRanked {
	return &AppRanked{name: "app-srtf",
		app: func(s *appStat) float64 { return s.maxRemain + float64(s.laterPhases)*s.phaseTime },
		job: remaining}
}

func NewAppSRSF() *AppRanked {
	return &AppRanked{name: "app-srsf",
		app: func(s *appStat) float64 { return s.service + float64(s.laterPhases)*s.phaseWork },
		job: func(j *core.Job) float64 { return remaining(j) * float64(j.GPUs) }}
}

func (p *AppRanked) Name() string                    { return p.name }
func (p *AppRanked) Preemptive() bool                { return true }
func (p *AppRanked) Blocking() bool                  { return false }
func (p *AppRanked) Consolidate(*core.Job) bool      { return true }
func (p *AppRanked) Capabilities() core.Capabilities { return core.RankOnly(p) }

// appOf is the job's app; a job without one is its own.
func appOf(j *core.Job) string {
	if j.App != "" {
		return j.App
	}
	return "\x00" + j.Key.Namespace + "\x00" + j.Key.ID
}

// Rank orders jobs by their app's metric, then their own, then FIFO. The
// apps are ordered by metric (ties by name, so that an app's jobs stay
// together) and each job ranks at its app's place as its level in the
// core's ranking (rankKeys), with its own metric as the key.
func (p *AppRanked) Rank(now time.Time, jobs []*core.Job) {
	if p.seen != nil {
		p.account(now, jobs)
	}
	r := newRankKeys(jobs) // puts jobs in FIFO order: index them after
	stats := map[string]*appStat{}
	apps := make([]string, len(r.jobs))
	for i, j := range r.jobs {
		a := appOf(j)
		apps[i] = a
		s := stats[a]
		if s == nil {
			s = &appStat{gone: p.gone[a]}
			stats[a] = s
		}
		rem := remaining(j)
		g := float64(max(j.GPUs, 1))
		s.attained += j.Attained
		s.maxRemain = max(s.maxRemain, rem)
		s.service += rem * g
		s.phaseTime = max(s.phaseTime, j.Attained/g+rem)
		s.phaseWork += j.Attained + rem*g
		s.laterPhases = max(s.laterPhases, j.LaterPhases)
	}
	type appKey struct {
		name string
		key  uint64
	}
	order := make([]appKey, 0, len(stats))
	for a, s := range stats {
		order = append(order, appKey{a, orderBits(p.app(s))})
	}
	slices.SortFunc(order, func(x, y appKey) int {
		if c := cmp.Compare(x.key, y.key); c != 0 {
			return c
		}
		return cmp.Compare(x.name, y.name)
	})
	place := make(map[string]int, len(order))
	for i, a := range order {
		place[a.name] = i
	}
	for i, j := range r.jobs {
		r.level[i], r.key[i] = place[apps[i]], p.job(j)
	}
	r.sort()
}

// account keeps app-las's service of jobs that left: a job seen at the
// last decision and absent now finished (or was removed) in between; it
// attained what it had then plus, if it was running, its GPUs for the time
// since (at most its known remaining time).
func (p *AppRanked) account(now time.Time, jobs []*core.Job) {
	p.round++
	for _, j := range jobs {
		rate := 0.0
		if j.Phase == core.Granted {
			rate = float64(j.GPUs)
		}
		p.seen[j.Key] = seenJob{app: appOf(j), attained: j.Attained, rate: rate, remain: remaining(j), round: p.round}
	}
	dt := max(0, now.Sub(p.lastNow).Seconds())
	if p.lastNow.IsZero() {
		dt = 0
	}
	for k, s := range p.seen {
		if s.round == p.round {
			continue
		}
		p.gone[s.app] += s.attained + s.rate*min(dt, s.remain)
		delete(p.seen, k)
	}
	p.lastNow = now
}
