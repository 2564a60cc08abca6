package nomad

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomadread"
)

// lists keeps Nomad's node, job-stub and allocation-stub lists between
// rounds, with the table index each was read at (#35, docs/scale.md).
//
// A round first asks Nomad for each table's index alone: a list of one
// row (per_page=1: the server reads two rows, whatever the table's size)
// carries in X-Nomad-Index the table's index, which every write to the
// table raises, deletions included. (Until #35's skipped rounds this was
// a filter no row matches, which sends no rows but makes the server scan
// the whole table: 64-71 ms at 12,000 jobs.) A kind whose index did not move is not listed again: the
// round reuses the rows it has. Nomad's filter has no "ModifyIndex > N",
// so a kind that changed is listed whole; what changed since is then
// found by each row's ModifyIndex (nodes parsed again) or, for jobs,
// JobModifyIndex (read and parsed again; listedJob).
type lists struct {
	// full is set when the next Snapshot must list everything.
	full atomic.Bool
	// always: every Snapshot lists everything (SetFullLists).
	always bool

	nodes      map[string]*api.NodeListStub
	nodesIndex uint64
	// jobs maps each listed job to what its stub says; order is their
	// keys in Nomad's list order (namespace, then ID), rebuilt when one
	// comes or goes.
	jobs      map[core.JobKey]listedJob
	order     []core.JobKey
	jobsIndex uint64
	allocs    map[string]*api.AllocationListStub
	allocsIdx uint64
	// allocRead lists the allocations without their task states and
	// reads in full only those that changed (nomadread.Allocs).
	allocRead nomadread.Allocs
}

// ForceFullList makes the next Snapshot list every node, job and
// allocation.
func (c *Client) ForceFullList() { c.lists.full.Store(true) }

// SetFullLists makes every Snapshot list (and parse) every node, job and
// allocation, as the planner did before #35: for measuring the difference
// (e2e/nodesim TestScaleRounds), and an escape hatch.
func (c *Client) SetFullLists(on bool) { c.lists.always = on }

// SetAllocReadsInFull makes every Snapshot whose allocations table moved
// list every allocation with its task states, as before
// nomadread.Allocs read only the changed ones in full: for measuring the
// difference (e2e/nodesim TestScalePhilly).
func (c *Client) SetAllocReadsInFull(on bool) { c.lists.allocRead.InFullAlways = on }

// indexOnly makes a list query ask for a table's index: one row, no
// filter (a filter would be evaluated row by row until a row matches).
func indexOnly(q api.QueryOptions) *api.QueryOptions {
	q.PerPage, q.Filter, q.NextToken = 1, "", ""
	return &q
}

// fullNow reports whether this Snapshot lists everything whatever the
// indexes say, and if so clears the request.
func (l *lists) fullNow() bool {
	return l.full.Swap(false) || l.always
}

// unchanged asks Nomad for a table's index (tableIndex, with list and
// the list's query q) and reports whether it is still index.
func unchanged[T any](index uint64, full bool, list func(*api.QueryOptions) ([]T, *api.QueryMeta, error), q *api.QueryOptions) (bool, error) {
	if full || index == 0 {
		return false, nil
	}
	now, err := tableIndex(list, *q)
	return err == nil && now == index, err
}

// tableIndex asks Nomad for a table's index: its list (list, with the
// list's query q) of one row.
func tableIndex[T any](list func(*api.QueryOptions) ([]T, *api.QueryMeta, error), q api.QueryOptions) (uint64, error) {
	_, meta, err := list(indexOnly(q))
	if err != nil {
		return 0, err
	}
	return meta.LastIndex, nil
}

// nodesQuery is the query that lists nodes (with their resources), and
// everyNamespace the one that lists jobs or allocations.
func nodesQuery(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{Params: map[string]string{"resources": "true"}}).WithContext(ctx)
}

func everyNamespace(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: "*"}).WithContext(ctx)
}

// listNodes returns every node stub (with resources), listed again only
// when the nodes table changed (or full). Every allocation update raises
// that table's index (Nomad stamps the node's LastAllocUpdateIndex)
// without changing the node, whose ModifyIndex stays: in a busy cluster
// the table changes every round while its nodes do not. So a changed
// table is listed first without resources (at 1,000 simulated nodes 0.45
// MB in 10 ms, against 2.4 MB in 140 ms with them) and again with them
// only when a node came, went or changed (sameNodes).
func (c *Client) listNodes(ctx context.Context, full bool) (map[string]*api.NodeListStub, error) {
	l := &c.lists
	refused := func(err error) error {
		return denied(fmt.Errorf("list nodes: %w", err), "list nodes (GET /v1/nodes)", `node { policy = "read" }`)
	}
	q := nodesQuery(ctx)
	same, err := unchanged(l.nodesIndex, full, c.api.Nodes().List, q)
	if err == nil && same {
		return l.nodes, nil
	}
	if err == nil && !full && l.nodes != nil {
		light, meta, err := c.api.Nodes().List((&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, refused(err)
		}
		if sameNodes(l.nodes, light) {
			l.nodesIndex = meta.LastIndex
			return l.nodes, nil
		}
	}
	var stubs []*api.NodeListStub
	var meta *api.QueryMeta
	if err == nil {
		stubs, meta, err = c.api.Nodes().List(q)
	}
	if err != nil {
		return nil, refused(err)
	}
	l.nodes = make(map[string]*api.NodeListStub, len(stubs))
	for _, n := range stubs {
		l.nodes[n.ID] = n
	}
	l.nodesIndex = meta.LastIndex
	return l.nodes, nil
}

// sameNodes reports whether light (a list without resources) has exactly
// the nodes of listed, each at the ModifyIndex it was listed at: every
// change to a node that a stub shows (its status, eligibility, drain,
// pool, fingerprint) raises its ModifyIndex.
func sameNodes(listed map[string]*api.NodeListStub, light []*api.NodeListStub) bool {
	if len(light) != len(listed) {
		return false
	}
	for _, n := range light {
		was, ok := listed[n.ID]
		if !ok || n.ModifyIndex == 0 || was.ModifyIndex != n.ModifyIndex {
			return false
		}
	}
	return true
}

// listedJob is what a job's stub says that a round needs: the index of
// the job's last definition change (JobModifyIndex: every register,
// including a stop, raises it), and its status. A status change raises
// only the stub's ModifyIndex (Nomad's setJobStatus), so a job whose
// allocations start or end is not read again: its cached definition
// takes the stub's status (Snapshot).
type listedJob struct {
	jobModifyIndex, modifyIndex uint64
	status                      string
}

// listJobs returns every job's key and stub in Nomad's list order, listed
// again only when the jobs table changed (or full).
func (c *Client) listJobs(ctx context.Context, full bool) ([]core.JobKey, map[core.JobKey]listedJob, error) {
	l := &c.lists
	q := everyNamespace(ctx)
	same, err := unchanged(l.jobsIndex, full, c.api.Jobs().List, q)
	if err == nil && same {
		return l.order, l.jobs, nil
	}
	var stubs []*api.JobListStub
	var meta *api.QueryMeta
	if err == nil {
		stubs, meta, err = c.api.Jobs().List(q)
	}
	if err != nil {
		return nil, nil, denied(fmt.Errorf("list jobs: %w", err), "list jobs (GET /v1/jobs?namespace=*)", `namespace "*" { capabilities = ["list-jobs", "read-job"] }`)
	}
	l.jobs = make(map[core.JobKey]listedJob, len(stubs))
	l.order = l.order[:0]
	for _, js := range stubs {
		key := core.JobKey{Namespace: js.Namespace, ID: js.ID}
		if key.Namespace == "" {
			key.Namespace = "default"
		}
		l.jobs[key] = listedJob{jobModifyIndex: js.JobModifyIndex, modifyIndex: js.ModifyIndex, status: js.Status}
		l.order = append(l.order, key)
	}
	// Nomad lists by namespace, then ID; kept so whatever it does.
	slices.SortFunc(l.order, func(a, b core.JobKey) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
	})
	l.jobsIndex = meta.LastIndex
	return l.order, l.jobs, nil
}

// forgetJob drops a job Nomad no longer has.
func (l *lists) forgetJob(k core.JobKey) {
	if _, ok := l.jobs[k]; !ok {
		return
	}
	delete(l.jobs, k)
	l.order = slices.DeleteFunc(l.order, func(o core.JobKey) bool { return o == k })
}

// listAllocs returns every allocation stub with its task states, read
// again only when the allocations table changed (or full), and then in
// full only for the allocations that changed (nomadread.Allocs).
func (c *Client) listAllocs(ctx context.Context, full bool) (map[string]*api.AllocationListStub, error) {
	l := &c.lists
	same, err := unchanged(l.allocsIdx, full, c.api.Allocations().List, everyNamespace(ctx))
	if err == nil && same {
		return l.allocs, nil
	}
	var stubs map[string]*api.AllocationListStub
	var index uint64
	if err == nil {
		stubs, index, err = l.allocRead.Read(ctx, c.api, full)
	}
	if err != nil {
		return nil, denied(fmt.Errorf("list allocations: %w", err), "list allocations (GET /v1/allocations?namespace=*)", `namespace "*" { capabilities = ["read-job"] }`)
	}
	l.allocs, l.allocsIdx = stubs, index
	return l.allocs, nil
}
