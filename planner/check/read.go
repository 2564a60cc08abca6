package check

import (
	"github.com/themis-nomad/themis/planner/aclhint"

	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/planner/nomadread"
)

// Reader takes snapshots of Consul and Nomad through their API clients.
type Reader struct {
	Nomad  *nomadapi.Client
	Consul *consulapi.Client
	// PendingPool is the planner's pending node pool (default
	// DefaultPendingPool).
	PendingPool string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// AllocsInFull lists every allocation with its task states and
	// resources at every snapshot, as before only the changed ones were
	// read in full: for measuring the difference.
	AllocsInFull bool

	mu sync.Mutex
	// jobs caches each job's full definition by JobModifyIndex: a job's
	// tasks and pool change only with a new version.
	jobs map[Ref]cachedJob

	// allocMu guards the allocations read last (allocRead) and what each
	// was converted to (allocs), by ID.
	allocMu   sync.Mutex
	allocRead nomadread.Allocs
	allocs    map[string]convertedAlloc
}

type cachedJob struct {
	index  uint64
	pool   string
	themis bool
}

// maxTries bounds how often Snapshot re-reads when the leases change while
// it reads Nomad.
const maxTries = 5

// Snapshot reads the themis keys and Nomad's jobs and allocations. The lease
// keys are read before and after Nomad, and the whole read is repeated if
// they changed in between: so every allocation is seen together with the
// leases that were in force when Nomad reported it (a lease released just
// after its allocation stopped, or granted just before one started, would
// otherwise look like a task running without its lease).
func (r *Reader) Snapshot(ctx context.Context) (Snapshot, error) {
	var last error
	for range maxTries {
		s, stable, err := r.read(ctx)
		if err != nil {
			return Snapshot{}, err
		}
		if stable {
			return s, nil
		}
		last = fmt.Errorf("the leases changed while Nomad was read, %d times in a row", maxTries)
		select {
		case <-ctx.Done():
			return Snapshot{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return Snapshot{}, last
}

func (r *Reader) read(ctx context.Context) (Snapshot, bool, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	s := Snapshot{PendingPool: r.PendingPool, Statuses: map[Ref]Status{}, Records: map[Ref]bool{}}
	if s.PendingPool == "" {
		s.PendingPool = DefaultPendingPool
	}
	q := (&consulapi.QueryOptions{RequireConsistent: true}).WithContext(ctx)
	leases, meta, err := r.Consul.KV().List(Root+"leases/", q)
	if err != nil {
		return s, false, consulDenied(fmt.Errorf("read %sleases/: %w", Root, err), Root+"leases/")
	}
	before := meta.LastIndex
	jobs, err := r.readJobs(ctx)
	if err != nil {
		return s, false, err
	}
	allocs, err := r.readAllocs(ctx)
	if err != nil {
		return s, false, err
	}
	s.Now = now()
	_, meta, err = r.Consul.KV().Keys(Root+"leases/", "", q)
	if err != nil {
		return s, false, consulDenied(fmt.Errorf("read %sleases/: %w", Root, err), Root+"leases/")
	}
	if meta.LastIndex != before {
		return s, false, nil
	}
	s.Jobs, s.Allocs = jobs, allocs
	for _, p := range leases {
		switch {
		case strings.HasPrefix(p.Key, JobLeasePath):
			l, err := DecodeJobLease(p.Key, p.Value)
			if err != nil {
				s.BadKeys = append(s.BadKeys, BadKey{p.Key, err.Error()})
				continue
			}
			s.JobLeases = append(s.JobLeases, l)
			if l.Revoke != nil {
				s.Revokes = append(s.Revokes, SeenRevoke{Job: l.Ref(), LeaseID: l.LeaseID, GrantedAt: l.GrantedAt, Revoke: *l.Revoke})
			}
		case strings.HasPrefix(p.Key, GPULeasePath):
			g, err := DecodeGPULease(p.Key, p.Value)
			if err != nil {
				s.BadKeys = append(s.BadKeys, BadKey{p.Key, err.Error()})
				continue
			}
			s.GPULeases = append(s.GPULeases, g)
		}
	}
	sts, _, err := r.Consul.KV().List(StatusPath, q)
	if err != nil {
		return s, false, consulDenied(fmt.Errorf("read %s: %w", StatusPath, err), StatusPath)
	}
	for _, p := range sts {
		ref, st, err := DecodeStatus(p.Key, p.Value)
		if err != nil {
			s.BadKeys = append(s.BadKeys, BadKey{p.Key, err.Error()})
			continue
		}
		s.Statuses[ref] = st
	}
	recs, _, err := r.Consul.KV().Keys(RecordPath, "", q)
	if err != nil {
		return s, false, consulDenied(fmt.Errorf("read %s: %w", RecordPath, err), RecordPath)
	}
	for _, k := range recs {
		if ns, job, err := splitJobKey(k, RecordPath); err == nil {
			s.Records[Ref{ns, job}] = true
		}
	}
	return s, true, nil
}

func (r *Reader) readJobs(ctx context.Context) ([]Job, error) {
	q := (&nomadapi.QueryOptions{Namespace: "*"}).WithContext(ctx)
	stubs, _, err := r.Nomad.Jobs().List(q)
	if err != nil {
		return nil, nomadDenied(fmt.Errorf("list Nomad jobs: %w", err), "list jobs (GET /v1/jobs?namespace=*)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		r.jobs = map[Ref]cachedJob{}
	}
	seen := map[Ref]bool{}
	var out []Job
	for _, st := range stubs {
		ref := Ref{nsOr(st.Namespace), st.ID}
		seen[ref] = true
		c, ok := r.jobs[ref]
		if !ok || c.index != st.JobModifyIndex {
			j, err := nomadread.Job(ctx, r.Nomad, ref.Namespace, st.ID)
			var bad *nomadread.Unreadable
			switch {
			case errors.Is(err, nomadread.ErrGone):
				continue // purged since the list
			case errors.As(err, &bad):
				// This job alone cannot be read: the others are
				// checked; it is taken for a themis job (its
				// allocations' GPUs are checked against the leases)
				// and read again next time.
				out = append(out, Job{Ref: ref, Status: st.Status, Stop: st.Stop, SubmitTime: time.Unix(0, st.SubmitTime),
					Themis: true, Unreadable: bad.Error()})
				delete(r.jobs, ref)
				continue
			case err != nil:
				return nil, nomadDenied(fmt.Errorf("read Nomad job %s: %w", ref, err), "read job "+ref.String())
			}
			c = cachedJob{index: st.JobModifyIndex, pool: deref(j.NodePool), themis: isThemis(j)}
			r.jobs[ref] = c
		}
		out = append(out, Job{Ref: ref, Pool: c.pool, Status: st.Status, Stop: st.Stop,
			SubmitTime: time.Unix(0, st.SubmitTime), Meta: st.Meta,
			Themis: c.themis || c.pool == cmpOr(r.PendingPool, DefaultPendingPool) ||
				plannerMarked(st.Meta)})
	}
	for ref := range r.jobs {
		if !seen[ref] {
			delete(r.jobs, ref)
		}
	}
	return out, nil
}

// plannerMarked: job meta names a lease (in either spelling) or a
// suspension, which only the planner's pin and suspension write.
func plannerMarked(meta map[string]string) bool {
	return meta[LeaseMeta] != "" || meta[OldLeaseMeta] != "" || meta[SuspendedMeta] != ""
}

// isThemis: the job has a task with the themis driver or a themis stanza.
func isThemis(j *nomadapi.Job) bool {
	if plannerMarked(j.Meta) {
		return true
	}
	for _, tg := range j.TaskGroups {
		for _, t := range tg.Tasks {
			if t.Driver == DriverName || t.Config[StanzaName] != nil {
				return true
			}
		}
	}
	return false
}

// readAllocs reads every allocation with its task states and resources,
// in full only those that changed since the last snapshot
// (nomadread.Allocs); each is converted again only when it changed.
func (r *Reader) readAllocs(ctx context.Context) ([]Alloc, error) {
	r.allocMu.Lock()
	defer r.allocMu.Unlock()
	r.allocRead.Resources, r.allocRead.InFullAlways = true, r.AllocsInFull
	stubs, _, err := r.allocRead.Read(ctx, r.Nomad, false)
	if err != nil {
		return nil, nomadDenied(fmt.Errorf("list Nomad allocations: %w", err), "list allocations (GET /v1/allocations?namespace=*)")
	}
	seen := make(map[string]convertedAlloc, len(stubs))
	out := make([]Alloc, 0, len(stubs))
	for _, st := range stubs {
		c, ok := r.allocs[st.ID]
		if !ok || c.stub != st {
			c = convertedAlloc{stub: st, alloc: allocFromStub(st)}
		}
		seen[st.ID] = c
		out = append(out, c.alloc)
	}
	r.allocs = seen
	// Nomad lists allocations by ID; the map does not keep an order.
	slices.SortFunc(out, func(a, b Alloc) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// convertedAlloc is an allocation's stub as last read and what the
// snapshot made of it.
type convertedAlloc struct {
	stub  *nomadapi.AllocationListStub
	alloc Alloc
}

func allocFromStub(st *nomadapi.AllocationListStub) Alloc {
	a := Alloc{ID: st.ID, Job: Ref{nsOr(st.Namespace), st.JobID}, NodeID: st.NodeID, NodeName: st.NodeName,
		ClientStatus: st.ClientStatus, CreateTime: time.Unix(0, st.CreateTime), ModifyTime: time.Unix(0, st.ModifyTime),
		Tasks: map[string]Task{}}
	for name, ts := range st.TaskStates {
		if ts == nil {
			continue
		}
		t := Task{State: ts.State, StartedAt: ts.StartedAt, FinishedAt: ts.FinishedAt}
		for _, e := range ts.Events {
			if e == nil {
				continue
			}
			t.Events = append(t.Events, eventFromNomad(e))
		}
		a.Tasks[name] = t
	}
	if st.AllocatedResources != nil {
		for name, tr := range st.AllocatedResources.Tasks {
			if tr == nil {
				continue
			}
			t := a.Tasks[name]
			for _, d := range tr.Devices {
				if d != nil && d.Vendor == topology.Vendor && d.Type == topology.DeviceType {
					t.GPUs = append(t.GPUs, d.DeviceIDs...)
				}
			}
			a.Tasks[name] = t
		}
	}
	return a
}

func eventFromNomad(e *nomadapi.TaskEvent) Event {
	ev := Event{Type: e.Type, Time: time.Unix(0, e.Time), Message: cmpOr(e.DisplayMessage, e.Message),
		ExitCode: e.ExitCode, Signal: e.Signal, KillTimeout: e.KillTimeout}
	if d := e.Details; d != nil {
		ev.OOMKilled = d["oom_killed"] == "true"
		if n, err := strconv.Atoi(d["signal"]); err == nil && ev.Signal == 0 {
			ev.Signal = n
		}
		if n, err := strconv.Atoi(d["exit_code"]); err == nil && ev.ExitCode == 0 {
			ev.ExitCode = n
		}
	}
	return ev
}

func nsOr(ns string) string { return cmpOr(ns, "default") }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// consulDenied and nomadDenied give an ACL refusal of `themis check`'s reads
// the read-only operator's policy (examples/acl/operator.*.hcl).
func consulDenied(err error, prefix string) error {
	return aclhint.Wrap(err, "Consul", "read "+prefix, `key_prefix "themis/" { policy = "read" }`, "operator.consul.hcl")
}

func nomadDenied(err error, call string) error {
	return aclhint.Wrap(err, "Nomad", call, `namespace "*" { policy = "read" }`, "operator.nomad.hcl")
}
