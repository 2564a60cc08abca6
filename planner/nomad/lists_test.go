package nomad

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/planner/core"
)

// fakeNomad serves the list and read endpoints Snapshot uses, with
// Nomad's table indexes (X-Nomad-Index, raised by every write to a table,
// deletions included) and a probe of one row (per_page=1).
type fakeNomad struct {
	mu     sync.Mutex
	index  uint64
	nodes  map[string]*api.NodeListStub
	jobs   map[string]*api.Job
	allocs map[string]*api.AllocationListStub
	// tables' indexes (Nomad's X-Nomad-Index of a list)
	nodesIdx, jobsIdx, allocsIdx uint64
	// listed counts the rows each list returned.
	listed map[string]int
	// requests are the requests served, "METHOD path" each, in order;
	// registered the jobs registered (PUT /v1/jobs), as sent.
	requests   []string
	registered []*api.Job
}

func newFakeNomad() *fakeNomad {
	return &fakeNomad{nodes: map[string]*api.NodeListStub{}, jobs: map[string]*api.Job{}, allocs: map[string]*api.AllocationListStub{}, listed: map[string]int{}}
}

func (f *fakeNomad) node(id string, gpus int) {
	f.index++
	var inst []*api.NodeDeviceResource
	var layout []topology.GPU
	dev := &api.NodeDeviceResource{Vendor: topology.Vendor, Type: topology.DeviceType, Name: "sim"}
	for i := range gpus {
		g := topology.GPU{Index: i, ID: fmt.Sprintf("%s-%d", id, i), Path: "pair" + strconv.Itoa(i/2), Healthy: true}
		layout = append(layout, g)
		dev.Instances = append(dev.Instances, &api.NodeDevice{ID: g.ID, Healthy: true})
	}
	lay := topology.EncodeLayout(layout)
	dev.Attributes = map[string]*api.Attribute{topology.AttrLayout: {StringVal: &lay}}
	inst = append(inst, dev)
	f.nodes[id] = &api.NodeListStub{ID: id, Name: id, Status: "ready", SchedulingEligibility: "eligible", NodePool: "default",
		ModifyIndex: f.index, NodeResources: &api.NodeResources{Devices: inst}}
	f.nodesIdx = f.index
}

func (f *fakeNomad) job(id string, gpus int, status string) {
	f.index++
	cfg := map[string]any{"command": "train", "themis": []any{map[string]any{"gpus": float64(gpus)}}}
	f.jobs[id] = &api.Job{ID: ptr(id), Namespace: ptr("default"), Status: ptr(status), NodePool: ptr(DefaultPendingPool),
		ModifyIndex: ptr(f.index), JobModifyIndex: ptr(f.index), Meta: map[string]string{},
		TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Count: ptr(1), Tasks: []*api.Task{{Name: "t", Driver: DriverName, Config: cfg}}}}}
	f.jobsIdx = f.index
}

// allocUpdate is a client's update of an allocation, which Nomad writes
// with the node's LastAllocUpdateIndex: the nodes table's index moves,
// the node's ModifyIndex does not.
func (f *fakeNomad) allocUpdate(id, job, status string) {
	f.alloc(id, job, status)
	f.nodesIdx = f.index
}

// status changes a job's status alone, as Nomad does when its
// allocations start or end (setJobStatus): the job's ModifyIndex moves,
// its JobModifyIndex does not.
func (f *fakeNomad) status(id, status string) {
	f.index++
	j := *f.jobs[id]
	j.Status, j.ModifyIndex = ptr(status), ptr(f.index)
	f.jobs[id] = &j
	f.jobsIdx = f.index
}

// jobReads counts the reads of whole jobs served so far.
func (f *fakeNomad) jobReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if strings.HasPrefix(r, "GET /v1/job/") {
			n++
		}
	}
	return n
}

func (f *fakeNomad) purge(id string) {
	f.index++
	delete(f.jobs, id)
	f.jobsIdx = f.index
}

// alloc writes an allocation of job's task "t", started at the write's
// index (in seconds) unless pending, and finished at it when complete.
func (f *fakeNomad) alloc(id, job, status string) {
	f.index++
	ts := &api.TaskState{State: "pending"}
	at := time.Unix(int64(f.index), 0)
	switch status {
	case "running":
		ts.State, ts.StartedAt = "running", at
	case "complete":
		ts.State, ts.StartedAt, ts.FinishedAt = "dead", at.Add(-time.Second), at
	}
	f.allocs[id] = &api.AllocationListStub{ID: id, JobID: job, Namespace: "default", NodeID: "n1", ClientStatus: status, ModifyIndex: f.index,
		TaskStates: map[string]*api.TaskState{"t": ts}}
	f.allocsIdx = f.index
}

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	if r.URL.Path == "/v1/jobs" && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
		f.register(w, r)
		return
	}
	// A probe of a table's index is a list of one row (per_page=1); a
	// filter would make Nomad scan the whole table, so none is served.
	if flt := r.URL.Query().Get("filter"); flt != "" {
		http.Error(w, "unexpected filter "+flt, http.StatusBadRequest)
		return
	}
	probe := false
	switch pp := r.URL.Query().Get("per_page"); pp {
	case "":
	case "1":
		probe = true
	default:
		http.Error(w, "unexpected per_page "+pp, http.StatusBadRequest)
		return
	}
	var out any
	var idx uint64
	switch {
	case r.URL.Path == "/v1/nodes":
		var l []*api.NodeListStub
		resources := r.URL.Query().Get("resources") == "true"
		for _, n := range f.nodes {
			if !resources {
				light := *n
				light.NodeResources = nil
				n = &light
			}
			l = append(l, n)
		}
		if resources && !probe {
			f.listed["/v1/nodes?resources=true"] += len(l)
		}
		out, idx = l, f.nodesIdx
	case r.URL.Path == "/v1/jobs":
		var l []*api.JobListStub
		for _, j := range f.jobs {
			l = append(l, &api.JobListStub{ID: *j.ID, Namespace: *j.Namespace, ModifyIndex: *j.ModifyIndex, JobModifyIndex: *j.JobModifyIndex, Status: *j.Status})
		}
		out, idx = l, f.jobsIdx
	case r.URL.Path == "/v1/allocations":
		// Nomad lists task states unless told not to.
		light := r.URL.Query().Get("task_states") == "false"
		var l []*api.AllocationListStub
		for _, a := range f.allocs {
			if light {
				c := *a
				c.TaskStates = nil
				a = &c
			}
			l = append(l, a)
		}
		out, idx = l, f.allocsIdx
	case strings.HasPrefix(r.URL.Path, "/v1/allocation/"):
		a := f.allocs[strings.TrimPrefix(r.URL.Path, "/v1/allocation/")]
		if a == nil {
			http.Error(w, "alloc not found", http.StatusNotFound)
			return
		}
		f.listed["/v1/allocation/"]++
		out, idx = &api.Allocation{ID: a.ID, JobID: a.JobID, Namespace: a.Namespace, NodeID: a.NodeID, ClientStatus: a.ClientStatus,
			ModifyIndex: a.ModifyIndex, TaskStates: a.TaskStates}, a.ModifyIndex
	case strings.HasPrefix(r.URL.Path, "/v1/job/"):
		j := f.jobs[strings.TrimPrefix(r.URL.Path, "/v1/job/")]
		if j == nil {
			http.Error(w, "job not found", http.StatusNotFound)
			return
		}
		out, idx = j, *j.ModifyIndex
	default:
		http.NotFound(w, r)
		return
	}
	if v := reflect.ValueOf(out); v.Kind() == reflect.Slice {
		if probe {
			out = v.Slice(0, min(1, v.Len())).Interface()
		} else {
			key := r.URL.Path
			if r.URL.Path == "/v1/allocations" && r.URL.Query().Get("task_states") == "false" {
				key += "?task_states=false"
			}
			f.listed[key] += v.Len()
		}
	}
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(idx, 10))
	_ = json.NewEncoder(w).Encode(out)
}

// register is Nomad's job register with its check-and-set, refused with
// Nomad's own messages (nomad/job_endpoint.go, Job.Register, "Enforcing
// job modify index"), which Nomad's HTTP API answers with a 500.
func (f *fakeNomad) register(w http.ResponseWriter, r *http.Request) {
	var req api.JobRegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Job == nil || req.Job.ID == nil {
		http.Error(w, fmt.Sprintf("bad register: %v", err), http.StatusBadRequest)
		return
	}
	existing := f.jobs[*req.Job.ID]
	if req.EnforceIndex {
		jmi := req.JobModifyIndex
		switch {
		case existing != nil && jmi == 0:
			http.Error(w, "Enforcing job modify index 0: job already exists", http.StatusInternalServerError)
			return
		case existing != nil && jmi != *existing.JobModifyIndex:
			http.Error(w, fmt.Sprintf("Enforcing job modify index %d: job exists with conflicting job modify index: %d", jmi, *existing.JobModifyIndex), http.StatusInternalServerError)
			return
		case existing == nil && jmi != 0:
			http.Error(w, fmt.Sprintf("Enforcing job modify index %d: job does not exist", jmi), http.StatusInternalServerError)
			return
		}
	}
	f.registered = append(f.registered, req.Job)
	f.index++
	job := *req.Job
	job.ModifyIndex, job.JobModifyIndex = ptr(f.index), ptr(f.index)
	if job.Status == nil {
		job.Status = ptr("pending")
	}
	f.jobs[*job.ID] = &job
	f.jobsIdx = f.index
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(f.index, 10))
	_ = json.NewEncoder(w).Encode(api.JobRegisterResponse{JobModifyIndex: f.index})
}

func fakeClient(t *testing.T, f *fakeNomad) *Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg := api.DefaultConfig()
	cfg.Address = srv.URL
	ac, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return NewClient(ac, "", hclog.NewNullLogger())
}

// summary is what a snapshot says, in a comparable form.
func summary(s *Snapshot) string {
	var b strings.Builder
	for _, n := range s.Nodes {
		fmt.Fprintf(&b, "node %s %d GPUs schedulable %v pool %s\n", n.ID, len(n.GPUs), n.Schedulable, s.Pools[n.ID])
	}
	for _, j := range s.Jobs {
		fmt.Fprintf(&b, "job %s index %d dead %v\n", j.Key, j.ModifyIndex(), j.Dead())
	}
	for _, k := range sortedKeys(s.Allocs) {
		for _, a := range s.Allocs[k] {
			fmt.Fprintf(&b, "alloc %s of %s %s started %d finished %d\n", a.ID, k, a.ClientStatus, a.Started.Unix(), a.Finished.Unix())
		}
	}
	return b.String()
}

func sortedKeys(m map[core.JobKey][]Alloc) []core.JobKey {
	var ks []core.JobKey
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b core.JobKey) int { return strings.Compare(a.ID, b.ID) })
	return ks
}

// Snapshot lists a kind again only when its table's index moved, yet says
// what a fresh client listing everything says, purged jobs included.
func TestSnapshotListsOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	f := newFakeNomad()
	for i := range 5 {
		f.node(fmt.Sprintf("n%d", i), 8)
	}
	for i := range 20 {
		f.job(fmt.Sprintf("j%02d", i), 1+i%8, "pending")
	}
	c := fakeClient(t, f)
	same := func(what string) {
		t.Helper()
		got, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		listed := f.listed
		f.listed = map[string]int{}
		f.mu.Unlock()
		want, err := fakeClient(t, f).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if summary(got) != summary(want) {
			t.Fatalf("%s: snapshot\n%s\na fresh client's\n%s", what, summary(got), summary(want))
		}
		f.listed = listed
	}
	same("first")
	f.listed = map[string]int{}
	same("nothing changed")
	if f.listed["/v1/nodes"]+f.listed["/v1/jobs"]+f.listed["/v1/allocations"]+f.listed["/v1/allocations?task_states=false"] != 0 {
		t.Errorf("nothing changed, yet the lists returned %v", f.listed)
	}
	f.alloc("a1", "j03", "running")
	f.alloc("a2", "j04", "pending")
	f.listed = map[string]int{}
	same("two allocations")
	if f.listed["/v1/nodes"] != 0 || f.listed["/v1/jobs"] != 0 || f.listed["/v1/allocations"] != 0 ||
		f.listed["/v1/allocations?task_states=false"] != 2 || f.listed["/v1/allocation/"] != 2 {
		t.Errorf("two allocations came: lists returned %v, want the allocations without task states, and each read", f.listed)
	}
	f.alloc("a2", "j04", "running")
	f.listed = map[string]int{}
	same("an allocation")
	if f.listed["/v1/allocations"] != 0 || f.listed["/v1/allocations?task_states=false"] != 2 || f.listed["/v1/allocation/"] != 1 {
		t.Errorf("one allocation changed: lists returned %v, want the allocations without task states, and the one read", f.listed)
	}
	f.allocUpdate("a1", "j03", "running")
	f.listed = map[string]int{}
	same("an allocation update, which raises the nodes table's index")
	if f.listed["/v1/nodes?resources=true"] != 0 || f.listed["/v1/nodes"] != 5 {
		t.Errorf("no node changed: lists returned %v, want the nodes without their resources alone", f.listed)
	}
	f.job("j03", 4, "running")
	f.node("n2", 4) // a GPU board removed
	f.listed = map[string]int{}
	same("a job and a node")
	if f.listed["/v1/nodes?resources=true"] != 5 {
		t.Errorf("a node changed: lists returned %v, want the nodes with their resources", f.listed)
	}
	f.status("j07", "running")
	same("a job's status alone")
	f.job("j03", 4, "dead")
	f.alloc("a1", "j03", "complete")
	same("job finished")
	f.purge("j05")
	same("purged")
	f.mu.Lock()
	delete(f.allocs, "a2") // garbage-collected
	f.index++
	f.allocsIdx = f.index
	f.mu.Unlock()
	same("an allocation garbage-collected")
	c.SetFullLists(true)
	f.listed = map[string]int{}
	same("full lists")
	if f.listed["/v1/nodes"] != 5 || f.listed["/v1/jobs"] != 19 || f.listed["/v1/allocations"] != 1 {
		t.Errorf("SetFullLists: lists returned %v, want every row", f.listed)
	}
}

// A job whose status alone changed (its allocations started or ended) is
// not read again: its definition stays, with the list's status, on a copy
// (an earlier snapshot's job does not change). A job whose definition
// changed is read again.
func TestSnapshotTakesAStatusFromTheList(t *testing.T) {
	ctx := context.Background()
	f := newFakeNomad()
	f.node("n0", 8)
	f.job("j1", 1, "pending")
	f.job("j2", 1, "pending")
	c := fakeClient(t, f)
	dead := func(s *Snapshot, id string) bool {
		t.Helper()
		for _, j := range s.Jobs {
			if j.Key.ID == id {
				return j.Dead()
			}
		}
		t.Fatalf("%s is not in the snapshot", id)
		return false
	}
	first, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.status("j1", "dead")
	before := f.jobReads()
	got, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.jobReads() - before; n != 0 {
		t.Errorf("a job whose status alone changed: %d reads of a whole job, want 0", n)
	}
	if !dead(got, "j1") || dead(first, "j1") {
		t.Errorf("j1 dead: %v now, %v in the snapshot before; want true, false", dead(got, "j1"), dead(first, "j1"))
	}
	f.job("j2", 2, "pending")
	before = f.jobReads()
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.jobReads() - before; n != 1 {
		t.Errorf("a job whose definition changed: %d reads of a whole job, want 1", n)
	}
}
