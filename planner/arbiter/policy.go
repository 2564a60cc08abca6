package arbiter

import (
	"time"

	"github.com/themis-nomad/themis/planner/auction"
	"github.com/themis-nomad/themis/planner/core"
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
	// LieRemaining maps an app to the factor on every job's reported
	// remaining time (0.5: reports half what it has left; its total shrinks
	// by as much): a workload misreporting its progress, in the simulator
	// (themis.lie_remaining; live, the workload's own progress reports).
	LieRemaining map[string]float64
	// FilterRemaining is the remaining time round-by-round filtering ranks
	// the apps by (themis.filter_remaining; agents.go): FilterReported
	// (""), FilterTruth or FilterAsRun.
	FilterRemaining string
	// FilterEstimate is the current ρ estimate round-by-round filtering
	// ranks the apps by (themis.filter_estimate; estimate.go):
	// EstimateCurrent (""), EstimateWhole or EstimateFluid.
	FilterEstimate string
	// EarlyEnd ends the best-off apps' leases early for an app left behind
	// by lease timing (earlyend.go; themis.early_end).
	EarlyEnd bool
	// EarlyEndRho is the ρ a left-behind newcomer must not reach for leases
	// to end early (themis.early_end_rho; 1 by default). EarlyEndVictim is the
	// ρ a cut job's app must stay at or below, waiting a lease
	// (themis.early_end_victim: 1, or EarlyEndRho).
	EarlyEndRho, EarlyEndVictim float64
	// done is the work of the apps' jobs that have left, kept only for
	// EstimateWhole and EstimateFluid (done.go).
	done doneWork

	leases map[core.JobKey]time.Time
	first  map[string]float64
	marks  map[string]auction.Mark
	cont   auction.Contention
	seed   uint64
	// reserving is the app the free GPUs are held for (see the package
	// doc), "" when none.
	reserving string
	// target is the machines the reservation gathers GPUs on (nil: all).
	target  map[string]bool
	rounds  uint64
	lastErr error
	// ran is the apps that have held GPUs (earlyend.go: only the others are
	// newcomers).
	ran map[string]bool
	// last is the last round's result, for operators (report.go).
	last *RoundReport
	// lastAt, lastGrants and lastStops are the last decision; resume says
	// the state was imported and the next decision carries out what is
	// left of it (resume.go).
	lastAt     time.Time
	lastGrants []core.Grant
	lastStops  []core.JobKey
	resume     bool
	// waiting is what the last allocation that left jobs waiting and
	// acted on nothing says of how long that stands (leases.go).
	waiting waitingSteady
}

// New returns a policy with f, lease (seconds) and the liars.
func New(f, lease float64, lie map[string]float64) *Policy {
	return &Policy{Fairness: f, Lease: lease, Lie: lie, leases: map[core.JobKey]time.Time{},
		first: map[string]float64{}, marks: map[string]auction.Mark{}, ran: map[string]bool{},
		EarlyEndRho: 1, EarlyEndVictim: 1}
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

// Capabilities implements core.Policy: the arbiter allocates GPUs itself
// on leases, which end at times it names; it keeps state for restarts,
// resumes a decision a crash interrupted, reports each auction round,
// draws its auctions' random numbers from a seed, and says how long its
// decision stands while nothing waits (SteadyUntil).
func (p *Policy) Capabilities() core.Capabilities {
	return core.Capabilities{Policy: p, Allocator: p, Rechecker: p, State: p, LeaseEnder: p,
		Resumer: p, Reporter: p, Seeder: p, Failer: p, Steady: p}
}
func secs(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
func appOf(j *core.Job) string {
	if j.App != "" {
		return j.App
	}
	return j.Key.String()
}
