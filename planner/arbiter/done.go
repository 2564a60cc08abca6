package arbiter

import "github.com/themis-nomad/themis/planner/core"

// doneWork is the work of each app's jobs that have left (finished), which
// themis.filter_estimate=whole and fluid count in the app's T_id
// (estimate.go): the agents model only the jobs they see. A job's work is
// its total GPU-seconds when last seen, as its agent models it (agents.go:
// its reported total, or what it has left plus what it has run). It lives
// in memory only: a planner that restarts (ImportState) starts it empty.
type doneWork struct {
	// seen is the jobs of the last round with their app and work.
	seen map[core.JobKey]seenJob
	// done is the work of each app's jobs that have left.
	done map[string]float64
}

type seenJob struct {
	app  string
	work float64
}

// observe records the jobs visible now; those seen before and gone now
// count as done.
func (d *doneWork) observe(jobs []*core.Job, reported func(app string, j *core.Job) *core.Job) {
	now := make(map[core.JobKey]seenJob, len(jobs))
	for _, j := range jobs {
		a := appOf(j)
		r := reported(a, j)
		now[j.Key] = seenJob{a, max(total(r), r.Remaining) * float64(max(1, j.GPUs))}
	}
	for k, s := range d.seen {
		if _, ok := now[k]; !ok {
			if d.done == nil {
				d.done = map[string]float64{}
			}
			d.done[s.app] += s.work
		}
	}
	d.seen = now
}

// of is the work of the app's jobs that have left.
func (d *doneWork) of(app string) float64 { return d.done[app] }
