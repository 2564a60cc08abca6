package httpapi

import (
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
)

// waits follows how long jobs wait, for the metrics: when each waiting
// job was first seen in a queue (by this planner, since it started
// leading), so that a grant observes its wait and each queue reports its
// longest one.
type waits struct {
	since map[core.JobKey]waiting
}

type waiting struct {
	vc    string
	since time.Time
}

// observe takes a decided round: it returns the waits its grants ended
// (per VC) and the longest wait still going in each VC's queue.
func (w *waits) observe(v planner.View) (granted []waited, oldest map[string]float64) {
	if w.since == nil {
		w.since = map[core.JobKey]waiting{}
	}
	jobs := map[core.JobKey]planner.JobView{}
	for _, j := range v.Jobs {
		jobs[j.Key] = j
	}
	for _, e := range v.Events {
		if e.Kind != planner.EventGrant {
			continue
		}
		j := jobs[e.Job]
		if s, ok := w.since[e.Job]; ok {
			granted = append(granted, waited{vc: s.vc, seconds: e.Time.Sub(s.since).Seconds()})
		} else if rec := j.Record; j.Valid && !rec.FirstSubmit.IsZero() && rec.FirstStart.IsZero() {
			// Queued and granted within one round: it waited since its
			// first submission.
			granted = append(granted, waited{vc: vcLabel(v, j.VC), seconds: e.Time.Sub(rec.FirstSubmit).Seconds()})
		}
		delete(w.since, e.Job)
	}
	oldest = map[string]float64{}
	still := map[core.JobKey]bool{}
	for _, q := range v.Queue {
		still[q.Job] = true
		s, ok := w.since[q.Job]
		if !ok {
			s = waiting{vc: q.VC, since: v.Time}
			if rec := jobs[q.Job].Record; !rec.FirstSubmit.IsZero() && rec.FirstStart.IsZero() && rec.FirstSubmit.Before(v.Time) {
				s.since = rec.FirstSubmit
			}
			w.since[q.Job] = s
		}
		oldest[q.VC] = max(oldest[q.VC], v.Time.Sub(s.since).Seconds())
	}
	for k := range w.since {
		if !still[k] {
			delete(w.since, k)
		}
	}
	return granted, oldest
}

type waited struct {
	vc      string
	seconds float64
}

// vcLabel is the vc label of a job's queue: its VC with virtual clusters,
// "" without (one queue).
func vcLabel(v planner.View, vc string) string {
	if len(v.VCs) == 0 {
		return ""
	}
	return vc
}
