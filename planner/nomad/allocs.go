package nomad

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
)

// Alloc is one allocation of a themis job, as the planner needs it: whether
// it still runs (a revoked lease is released only once its allocation is
// terminal) and how long its task ran (attained service).
type Alloc struct {
	ID     string
	NodeID string
	// ClientStatus is Nomad's: pending, running, complete, failed, lost.
	ClientStatus string
	Created      time.Time
	// Modified is when Nomad last changed the allocation: for one the
	// servers marked lost, when they did (its client, down, cannot update
	// it), which is when the lost-allocation bound starts (planner/lost.go).
	Modified time.Time
	// Started and Finished are the themis task's; zero when it has not
	// started or not finished. Nomad resets Started at every restart of
	// the task, which Restarts counts.
	Started, Finished time.Time
	Restarts          uint64
	// Failure is why the allocation failed or was lost, in Nomad's words
	// (the themis task's failing event, or the allocation's description);
	// "" for one that did not fail.
	Failure string
}

// Terminal reports whether the allocation will never run again on its node.
func (a Alloc) Terminal() bool {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// RanFor is how long the allocation's task ran up to now (to its finish
// when it finished). A task that restarted is counted from the
// allocation's creation, not its last start (Nomad's StartedAt): its
// allocation held the GPUs all along, restart delays included, and a
// task that fails and restarts forever must not look new to the policies
// (docs/adversary.md).
func (a Alloc) RanFor(now time.Time) time.Duration {
	if a.Restarts > 0 && !a.Created.IsZero() {
		end := now
		if a.Terminal() {
			if a.Finished.IsZero() {
				return 0
			}
			end = a.Finished
		}
		return max(0, end.Sub(a.Created))
	}
	if a.Started.IsZero() {
		return 0
	}
	end := a.Finished
	if end.IsZero() || a.Finished.Before(a.Started) {
		if a.Terminal() {
			return 0
		}
		end = now
	}
	return max(0, end.Sub(a.Started))
}

// allocations lists every allocation in one call, keyed by job; the task
// times are read for the themis jobs given. Jobs purged from Nomad keep
// their allocations in the list until those are garbage-collected, which
// is how the planner knows when a purged job's GPUs are really free.
func (c *Client) allocations(ctx context.Context, jobs map[core.JobKey]*Job, full bool) (map[core.JobKey][]Alloc, error) {
	stubs, err := c.listAllocs(ctx, full)
	if err != nil {
		return nil, err
	}
	out := map[core.JobKey][]Alloc{}
	for _, s := range stubs {
		key := core.JobKey{Namespace: s.Namespace, ID: s.JobID}
		if key.Namespace == "" {
			key.Namespace = "default"
		}
		out[key] = append(out[key], allocOf(s, jobs[key]))
	}
	// Nomad lists allocations by ID; the map does not keep an order.
	for _, as := range out {
		slices.SortFunc(as, func(a, b Alloc) int { return strings.Compare(a.ID, b.ID) })
	}
	return out, nil
}

// allocOf is the allocation s of job j (nil: not a themis job, whose task
// times are not read).
func allocOf(s *api.AllocationListStub, j *Job) Alloc {
	a := Alloc{ID: s.ID, NodeID: s.NodeID, ClientStatus: s.ClientStatus, Created: time.Unix(0, s.CreateTime), Modified: time.Unix(0, s.ModifyTime)}
	if s.ModifyTime == 0 {
		a.Modified = a.Created
	}
	if j == nil {
		return a
	}
	if ts := s.TaskStates[j.Task]; ts != nil {
		a.Started, a.Finished, a.Restarts = ts.StartedAt, ts.FinishedAt, ts.Restarts
	}
	a.Failure = Failure(s.ClientStatus, s.ClientDescription, j.Task, s.TaskStates[j.Task])
	return a
}
