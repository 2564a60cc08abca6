package planner

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

func (p *Planner) loadStatuses(ctx context.Context) error {
	sts, err := p.cfg.Store.Statuses(ctx)
	bad, err := consul.Unreadable(err)
	if err != nil {
		return err
	}
	// A status record that cannot be used is written anew by the round
	// (it is missing here, so it differs).
	p.warnBadKeys(bad)
	p.statuses = make(map[core.JobKey]lease.JobStatus, len(sts))
	for _, st := range sts {
		p.statuses[core.JobKey{Namespace: st.Namespace, ID: st.JobID}] = st
	}
	return nil
}

// writeStatuses writes the records that changed (Since set to now) and
// deletes those of jobs that left Nomad, in as few Consul transactions as
// the store needs (Store.WriteStatuses). p.statuses only takes what Consul
// committed: a record whose transaction failed still differs from it, so
// the next round writes it again.
func (p *Planner) writeStatuses(ctx context.Context, next map[core.JobKey]lease.JobStatus, now time.Time) error {
	var puts []lease.JobStatus
	for k, st := range next {
		st.Namespace, st.JobID = k.Namespace, k.ID
		st.Reason = lease.BoundReason(st.Reason)
		old, ok := p.statuses[k]
		if ok && old.State == st.State && old.Reason == st.Reason && old.LeaseID == st.LeaseID && old.Preemptions == st.Preemptions && old.Held == st.Held {
			continue
		}
		st.Since = now.UTC()
		puts = append(puts, st)
	}
	var dels []core.JobKey
	for k := range p.statuses {
		if _, ok := next[k]; !ok {
			dels = append(dels, k)
		}
	}
	if len(puts) == 0 && len(dels) == 0 {
		return nil
	}
	// In key order, so that the transactions are the same for the same
	// changes (map order is random).
	slices.SortFunc(puts, func(a, b lease.JobStatus) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.JobID, b.JobID))
	})
	slices.SortFunc(dels, compareKeys)
	n, err := p.cfg.Store.WriteStatuses(ctx, puts, dels)
	refused, err := p.refusedStatuses(err, puts, dels)
	for i, st := range puts[:min(n, len(puts))] {
		if refused[i] {
			continue
		}
		k := core.JobKey{Namespace: st.Namespace, ID: st.JobID}
		if old, ok := p.statuses[k]; !ok || old.State != st.State || old.Reason != st.Reason {
			switch st.State {
			case "rejected":
				p.log.Error("rejected a themis job", "job", k, "error", st.Reason)
			case StatePurged:
				p.log.Error("a held job was purged from Nomad: the planner keeps its record and does not report it finished", "job", k, "reason", st.Reason)
			case StateUnreadable:
				p.log.Error("set a job aside: it cannot be read; every other job is decided as usual", "job", k, "reason", st.Reason)
			}
		}
		p.statuses[k] = st
	}
	for i, k := range dels[:max(0, min(n-len(puts), len(dels)))] {
		if !refused[len(puts)+i] {
			delete(p.statuses, k)
		}
	}
	return err
}

// refusedStatuses takes out of err the status writes Consul refused alone
// (consul.Refused: a record too large, or one whose write rolled its
// transaction back), each logged once and kept as written, so that it is
// tried again only when it changes and no round fails for it; the others
// were written. It returns them by their index in puts then dels, and
// err without them.
func (p *Planner) refusedStatuses(err error, puts []lease.JobStatus, dels []core.JobKey) (map[int]bool, error) {
	writes, err := consul.Refused(err)
	if len(writes) == 0 {
		return nil, err
	}
	refused := make(map[int]bool, len(writes))
	for _, w := range writes {
		refused[w.Index] = true
		if w.Index < len(puts) {
			st := puts[w.Index]
			p.log.Error("a job's status record cannot be written; every other job's is", "job", fmt.Sprintf("%.200s", st.Key()), "state", st.State, "reason", st.Reason, "error", w.Err)
			p.statuses[st.Key()] = st
		} else if i := w.Index - len(puts); i < len(dels) {
			p.log.Error("a job's status record cannot be deleted; every other job's is", "job", fmt.Sprintf("%.200s", dels[i]), "error", w.Err)
			delete(p.statuses, dels[i])
		}
	}
	return refused, err
}
