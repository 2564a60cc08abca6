package nomadread

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"

	"github.com/hashicorp/nomad/api"
)

// Allocs keeps every allocation's stub, with its task states and (with
// Resources) its allocated resources, from one Read to the next, and
// reads in full only the allocations that changed (#35, docs/scale.md).
//
// A stub with its task states is about 2.6 times the size of one
// without (2.1 against 0.8 KB for a simulated node's allocation), and
// Nomad's list has no "changed since" filter (its filter language has no
// ordering operator). So Read lists every allocation without task states
// or resources, then reads each allocation that is new or whose
// ModifyIndex moved (Nomad raises it at every write of the allocation:
// the scheduler's, the client's status reports, a desired-status change)
// on its own, at most Workers at a time; when more than MaxReads changed
// (or on the first Read) it lists them all in full instead, one call. An
// allocation the light list no longer has is dropped: garbage-collected.
//
// Each stub is then the allocation as of the light list or later (one
// read on its own after it): an allocation that changed again in between
// is seen at its newer state, never at an older one.
type Allocs struct {
	// Resources makes the stubs carry AllocatedResources.
	Resources bool
	// MaxReads is the most changed allocations read one by one (default
	// 64); Workers how many of those reads run at once (default 8).
	MaxReads, Workers int
	// InFullAlways lists every allocation in full at every Read, as the
	// planner and the watcher read before: for measuring the difference.
	InFullAlways bool

	byID map[string]*api.AllocationListStub
	// InFull and OneByOne count the stubs listed in full and the
	// allocations read on their own, for tests and measurements.
	InFull, OneByOne int
}

// ErrAllocGone is an allocation Nomad no longer has.
var ErrAllocGone = errors.New("allocation not in Nomad")

// Read returns every allocation's stub by ID, read as the type's comment
// says, and the allocations table's index at the light list. full lists
// every allocation in full whatever changed. The map and its stubs are
// the caller's to read until the next Read, never to change.
func (a *Allocs) Read(ctx context.Context, c *api.Client, full bool) (map[string]*api.AllocationListStub, uint64, error) {
	if a.byID == nil || full || a.InFullAlways {
		return a.listFull(ctx, c)
	}
	q := (&api.QueryOptions{Namespace: "*", Params: map[string]string{"task_states": "false"}}).WithContext(ctx)
	light, meta, err := c.Allocations().List(q)
	if err != nil {
		return nil, 0, err
	}
	var changed []*api.AllocationListStub
	for _, s := range light {
		if was, ok := a.byID[s.ID]; !ok || was.ModifyIndex != s.ModifyIndex {
			changed = append(changed, s)
		}
	}
	if len(changed) > cmpOr(a.MaxReads, 64) {
		return a.listFull(ctx, c)
	}
	read, err := a.readEach(ctx, c, changed)
	if err != nil {
		return nil, 0, err
	}
	next := make(map[string]*api.AllocationListStub, len(light))
	for _, s := range light {
		if r, ok := read[s.ID]; ok {
			if r != nil { // nil: gone since the list
				next[s.ID] = r
			}
			continue
		}
		next[s.ID] = a.byID[s.ID]
	}
	a.byID = next
	return next, meta.LastIndex, nil
}

// listFull lists every allocation with its task states (and resources).
func (a *Allocs) listFull(ctx context.Context, c *api.Client) (map[string]*api.AllocationListStub, uint64, error) {
	params := map[string]string{"task_states": "true"}
	if a.Resources {
		params["resources"] = "true"
	}
	stubs, meta, err := c.Allocations().List((&api.QueryOptions{Namespace: "*", Params: params}).WithContext(ctx))
	if err != nil {
		return nil, 0, err
	}
	a.byID = make(map[string]*api.AllocationListStub, len(stubs))
	for _, s := range stubs {
		a.byID[s.ID] = s
	}
	a.InFull += len(stubs)
	return a.byID, meta.LastIndex, nil
}

// readEach reads each allocation of changed on its own: its stub, or nil
// for one gone since it was listed.
func (a *Allocs) readEach(ctx context.Context, c *api.Client, changed []*api.AllocationListStub) (map[string]*api.AllocationListStub, error) {
	out := make(map[string]*api.AllocationListStub, len(changed))
	if len(changed) == 0 {
		return out, nil
	}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, cmpOr(a.Workers, 8))
	var wg sync.WaitGroup
	for _, s := range changed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			got, err := Alloc(ctx, c, s.Namespace, s.ID, a.Resources)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, ErrAllocGone):
				out[s.ID] = nil
			case err != nil:
				errs = append(errs, err)
			default:
				out[s.ID] = got
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	a.OneByOne += len(changed)
	return out, nil
}

// Alloc reads allocation id of namespace ns as a list stub with its task
// states (and with resources, its allocated resources). ErrAllocGone:
// Nomad has no such allocation.
func Alloc(ctx context.Context, c *api.Client, ns, id string, resources bool) (*api.AllocationListStub, error) {
	var al api.Allocation
	_, err := c.Raw().Query("/v1/allocation/"+url.PathEscape(id), &al, (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) && ue.StatusCode() == 404 {
		return nil, ErrAllocGone
	}
	if err != nil {
		return nil, fmt.Errorf("read allocation %s: %w", id, err)
	}
	if al.ID != id {
		return nil, fmt.Errorf("read allocation %s: Nomad answered with allocation %q", id, al.ID)
	}
	return stubOf(&al, resources), nil
}

// stubOf is a's list stub, as Nomad's list makes it (Allocation.Stub):
// with its task states, and its allocated resources when resources.
func stubOf(a *api.Allocation, resources bool) *api.AllocationListStub {
	s := &api.AllocationListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace, NodeID: a.NodeID, NodeName: a.NodeName,
		JobID: a.JobID, TaskGroup: a.TaskGroup, DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription, TaskStates: a.TaskStates,
		DeploymentStatus: a.DeploymentStatus, FollowupEvalID: a.FollowupEvalID, NextAllocation: a.NextAllocation,
		RescheduleTracker: a.RescheduleTracker, PreemptedAllocations: a.PreemptedAllocations,
		PreemptedByAllocation: a.PreemptedByAllocation, CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex,
		CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
	if a.Job != nil {
		s.JobType, s.JobVersion = deref(a.Job.Type), deref(a.Job.Version)
	}
	if resources {
		s.AllocatedResources = a.AllocatedResources
	}
	return s
}

func cmpOr(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}
