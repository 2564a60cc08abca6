package arbiter

import (
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

// SteadyUntil implements core.Steady. With a job waiting, any round may
// end a lease early or hold GPUs for a reservation, and with a lease over
// it auctions: Themis is steady then only now. With nothing waiting a
// round only observes (the apps active stay as many, so the contention's
// clock takes nothing new: auction.Contention.Set) until the first
// running job's lease ends, a millisecond early as expired counts it. A
// decision left to carry out after an import is now too.
func (p *Policy) SteadyUntil(now time.Time, jobs []*core.Job) time.Time {
	if p.resume {
		return now
	}
	var next time.Time
	for _, j := range jobs {
		switch j.Phase {
		case core.Queued:
			return now
		case core.Granted:
			e, ok := p.leases[j.Key]
			if !ok || expired(e, now) {
				return now
			}
			if next.IsZero() || e.Before(next) {
				next = e
			}
		}
	}
	if next.IsZero() {
		return next // nothing runs or waits: never with the clock alone
	}
	return next.Add(-time.Millisecond)
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
