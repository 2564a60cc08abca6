package check

import (
	"context"
	"time"
)

// Watcher takes a snapshot every Interval and reports each violation once.
// It remembers the revokes it saw, so that a preempted task's kill is
// checked against its deadline after the planner has released the lease.
type Watcher struct {
	Reader     *Reader
	Interval   time.Duration
	Tolerances Tolerances
	// Remember is how long a revoke is kept after its lease was last seen
	// (default 1h).
	Remember time.Duration
	// Report is called with each new violation.
	Report func(Violation)
	// Error is called when a snapshot fails (Consul or Nomad down); the
	// watcher goes on.
	Error func(error)

	revokes  map[string]seenAt
	reported map[string]bool
}

type seenAt struct {
	r    SeenRevoke
	last time.Time
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	iv := w.Interval
	if iv <= 0 {
		iv = time.Second
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		if _, err := w.Pass(ctx); err != nil && ctx.Err() == nil && w.Error != nil {
			w.Error(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass takes one snapshot, reports the violations not reported before and
// returns all it found.
func (w *Watcher) Pass(ctx context.Context) ([]Violation, error) {
	s, err := w.Reader.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	vs := Check(w.remember(s), w.Tolerances)
	w.report(vs)
	return vs, nil
}

// report reports the violations not reported in the previous pass.
func (w *Watcher) report(vs []Violation) {
	// Only what this pass found stays reported: a violation that ends and
	// comes back is reported again.
	reported := map[string]bool{}
	for _, v := range vs {
		id := v.ID()
		if !w.reported[id] && w.Report != nil {
			w.Report(v)
		}
		reported[id] = true
	}
	w.reported = reported
}

// remember adds the revokes seen before to the snapshot's, and forgets
// those not seen for Remember.
func (w *Watcher) remember(s Snapshot) Snapshot {
	if w.revokes == nil {
		w.revokes = map[string]seenAt{}
	}
	keep := w.Remember
	if keep <= 0 {
		keep = time.Hour
	}
	for _, r := range s.Revokes {
		w.revokes[r.LeaseID] = seenAt{r, s.Now}
	}
	current := map[string]bool{}
	for _, r := range s.Revokes {
		current[r.LeaseID] = true
	}
	for id, r := range w.revokes {
		switch {
		case s.Now.Sub(r.last) > keep:
			delete(w.revokes, id)
		case !current[id]:
			s.Revokes = append(s.Revokes, r.r)
		}
	}
	return s
}
