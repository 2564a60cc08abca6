package planner

import (
	"context"
	"errors"
	"time"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
)

func (p *Planner) loadStatuses(ctx context.Context) error {
	sts, err := p.cfg.Store.Statuses(ctx)
	if err != nil {
		return err
	}
	p.statuses = make(map[core.JobKey]consul.JobStatus, len(sts))
	for _, st := range sts {
		p.statuses[core.JobKey{Namespace: st.Namespace, ID: st.JobID}] = st
	}
	return nil
}

// writeStatuses writes the records that changed and deletes those of jobs
// that left Nomad.
func (p *Planner) writeStatuses(ctx context.Context, next map[core.JobKey]consul.JobStatus, now time.Time) error {
	var errs []error
	for k, st := range next {
		st.Namespace, st.JobID = k.Namespace, k.ID
		old, ok := p.statuses[k]
		if ok && old.State == st.State && old.Reason == st.Reason && old.LeaseID == st.LeaseID && old.Preemptions == st.Preemptions {
			continue
		}
		st.Since = now.UTC()
		if err := p.cfg.Store.PutStatus(ctx, st); err != nil {
			errs = append(errs, err)
			continue
		}
		if st.State == "rejected" && (!ok || old.Reason != st.Reason) {
			p.log.Error("rejected a themis job", "job", k, "error", st.Reason)
		}
		p.statuses[k] = st
	}
	for k := range p.statuses {
		if _, ok := next[k]; ok {
			continue
		}
		if err := p.cfg.Store.DeleteStatus(ctx, k); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(p.statuses, k)
	}
	return errors.Join(errs...)
}
