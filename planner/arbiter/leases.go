package arbiter

import (
	"math"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// Leases: a running job holds its GPUs until its lease ends (Policy.leases);
// then its GPUs are offered again. The steps of Allocate that read and
// write the leases are observe (which leases are over), grantAwards (new
// leases), endLeases (the expired jobs that lost or moved), the
// reservation's gatherOnCluster and gatherOnTarget (leases ended or
// renewed), earlyEndFor (leases ended early) and runRound (leases renewed
// when a round cannot run).

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

// SteadyUntil implements core.Steady: until the first running job's lease
// ends (a millisecond early, as expired counts it), or never with nothing
// running. With nothing waiting a round only observes until then (the
// apps active stay as many, so the contention's clock takes nothing new:
// auction.Contention.Set). With a job waiting, only when the allocation of
// this round (at now) acted on nothing because it had nothing to offer:
// no GPU free, no lease over, and no lease ended early; then the
// early-end rule can first end one calm seconds on (earlyEndFor), so the
// decision stands until then too. Any other round with a job waiting
// offered GPUs (an auction, whose random stream moves, or a reservation)
// and stands only now, as does a decision left to carry out after an
// import.
func (p *Policy) SteadyUntil(now time.Time, jobs []*core.Job) time.Time {
	if p.resume {
		return now
	}
	var next time.Time
	earliest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	waiting := false
	for _, j := range jobs {
		switch j.Phase {
		case core.Queued:
			waiting = true
		case core.Granted:
			e, ok := p.leases[j.Key]
			if !ok || expired(e, now) {
				return now
			}
			earliest(e.Add(-time.Millisecond))
		}
	}
	if waiting {
		w := p.waiting
		if !w.at.Equal(now) {
			return now // this round's allocation offered GPUs, or did not run
		}
		if !math.IsInf(w.calm, 1) {
			calm := time.Duration(min(w.calm, maxCalm.Seconds()) * float64(time.Second))
			if calm <= time.Millisecond {
				return now
			}
			earliest(now.Add(calm - time.Millisecond))
		}
	}
	return next // zero: nothing runs, or nothing can change with the clock alone
}

// maxCalm caps how long an early-end horizon is taken to be (a far one
// is as good: the planner runs a full round every few minutes anyway).
const maxCalm = 24 * time.Hour

// waitingSteady is what an allocation that left jobs waiting and acted on
// nothing, at at, says: no lease can end early for calm seconds (+Inf:
// none can) with only the clock moving. The zero value says nothing.
type waitingSteady struct {
	at   time.Time
	calm float64
}

// expired reports whether a lease ending at e is over at now (a
// millisecond of slack for the simulator's float clock).
func expired(e, now time.Time) bool { return !e.After(now.Add(time.Millisecond)) }

// endLeases is Allocate's last step: the jobs to stop. Every expired job
// that its app's award did not keep in place stops: one granted a gang
// elsewhere moves (stopped and granted in the same decision), one granted
// nothing loses its lease. The leases ended for a reservation come first.
func (p *Policy) endLeases(r *round, grants []core.Grant, kept map[core.JobKey]bool) []core.JobKey {
	granted := make(map[core.JobKey]bool, len(grants))
	for _, g := range grants {
		granted[g.Job] = true
	}
	stop := r.ended
	for _, j := range r.expiredJobs {
		switch {
		case kept[j.Key]:
		case granted[j.Key]:
			stop = append(stop, j.Key) // moves
		default:
			stop = append(stop, j.Key) // lost its lease
			delete(p.leases, j.Key)
		}
	}
	return stop
}
