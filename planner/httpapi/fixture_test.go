package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/lease"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func key(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }

// fixture is a round's view: dev-node's gpu-0/1 leased to a, gpu-2 held
// by b (being preempted for c), gpu-3 unhealthy; spare-node (draining)
// has two free GPUs; c and d wait; bad was rejected and crash failed.
func fixture() planner.View {
	gpu := func(i int, healthy bool) core.GPU {
		return core.GPU{ID: "gpu-" + strconv.Itoa(i), Index: i % 4, Path: []string{"socket0", "pair" + strconv.Itoa(i%4/2)}, Healthy: healthy}
	}
	return planner.View{
		Time: t0, Duration: 20 * time.Millisecond, Decided: true, Policy: "fitgpp", Placement: "free",
		Nodes: []core.Node{
			{ID: "n1", Name: "dev-node", Rack: "rack0", Schedulable: true, GPUs: []core.GPU{gpu(0, true), gpu(1, true), gpu(2, true), gpu(3, false)}},
			{ID: "n2", Name: "spare-node", Schedulable: false, GPUs: []core.GPU{gpu(4, true), gpu(5, true)}},
		},
		Leases: []lease.JobLease{
			{LeaseID: "L-a", Namespace: "default", JobID: "a", NodeID: "n1", NodeName: "dev-node", GPUs: []string{"gpu-0", "gpu-1"}, VC: "default", GrantedAt: t0.Add(-time.Minute), SubmitIndex: 7},
			{LeaseID: "L-b", Namespace: "default", JobID: "b", NodeID: "n1", NodeName: "dev-node", GPUs: []string{"gpu-2"}, VC: "default", GrantedAt: t0.Add(-time.Hour), SubmitIndex: 3,
				Revoke: &lease.Revoke{Reason: "preempted by fitgpp for default/c", Since: t0, Deadline: t0.Add(30 * time.Second)}},
		},
		Jobs: []planner.JobView{
			{Key: key("a"), Valid: true, GPUs: 2, VC: "default", Class: "be", Status: lease.JobStatus{Namespace: "default", JobID: "a", State: "granted", Node: "dev-node", GPUs: []string{"gpu-0", "gpu-1"}, LeaseID: "L-a", Since: t0.Add(-time.Minute)},
				Record: lease.JobRecord{FirstSubmit: t0.Add(-2 * time.Minute), FirstStart: t0.Add(-time.Minute)}},
			{Key: key("b"), Valid: true, GPUs: 1, VC: "default", Class: "be", Status: lease.JobStatus{Namespace: "default", JobID: "b", State: "revoking", Reason: "preempted by fitgpp for default/c", Deadline: t0.Add(30 * time.Second), Since: t0}},
			{Key: key("c"), Valid: true, GPUs: 1, VC: "default", Class: "te", Status: lease.JobStatus{Namespace: "default", JobID: "c", State: "queued", Reason: "granted 1 GPUs on dev-node; waiting for default/b to stop", Since: t0}},
			{Key: key("d"), Valid: true, GPUs: 4, VC: "default", Class: "be", Status: lease.JobStatus{Namespace: "default", JobID: "d", State: "suspended", Reason: "waiting for 4 free GPUs (0 free)", Since: t0, Preemptions: 1},
				Record: lease.JobRecord{Executed: 60, Attained: 240, Preemptions: 1}},
			{Key: key("bad"), Status: lease.JobStatus{Namespace: "default", JobID: "bad", State: "rejected", Reason: "themis.gpus: must be a whole number", Since: t0}},
			{Key: key("crash"), Valid: true, GPUs: 1, VC: "default", Class: "be", Status: lease.JobStatus{Namespace: "default", JobID: "crash", State: "failed",
				Reason: `task "hello": Driver Failure: failed to launch command with executor: permission denied`, Since: t0}},
		},
		Queue: []planner.Queued{
			{Job: key("c"), Position: 1, GPUs: 1, State: "queued", Reason: "granted 1 GPUs on dev-node; waiting for default/b to stop"},
			{Job: key("d"), Position: 2, GPUs: 4, State: "suspended", Reason: "waiting for 4 free GPUs (0 free)"},
		},
		Events: []planner.Event{
			{Time: t0, Kind: planner.EventPreempt, Job: key("b"), Node: "dev-node", GPUs: []string{"gpu-2"}, LeaseID: "L-b", Reason: "preempted by fitgpp for default/c"},
		},
	}
}

// vcFixture is a view with one virtual cluster whose socket holds job v.
func vcFixture() planner.View {
	v := planner.View{
		Time: t0, Decided: true, Policy: "fifo", Placement: "hived",
		Nodes: []core.Node{{ID: "n1", Name: "dev-node", Schedulable: true, GPUs: []core.GPU{
			{ID: "g0", Index: 0, Path: []string{"socket0"}, Healthy: true}, {ID: "g1", Index: 1, Path: []string{"socket0"}, Healthy: true}}}},
		Leases: []lease.JobLease{{LeaseID: "L-v", Namespace: "default", JobID: "v", NodeID: "n1", NodeName: "dev-node", GPUs: []string{"g0"},
			VC: "vision", GrantedAt: t0, Cells: []string{"vision/socket2.0/gpu.0"}}},
		Jobs: []planner.JobView{
			{Key: key("v"), Valid: true, GPUs: 1, VC: "vision", Status: lease.JobStatus{State: "granted"}},
			{Key: key("w"), Valid: true, GPUs: 2, VC: "vision", Status: lease.JobStatus{State: "queued", Reason: "no room"}},
		},
		Queue: []planner.Queued{{Job: key("w"), VC: "vision", Position: 1, GPUs: 2, State: "queued", Reason: "no room"}},
		VCs: []planner.VCView{{
			VCView: hived.VCView{Name: "vision", Cells: map[string]int{"socket2": 1}, GPUs: 2, Used: 1, Free: 1},
			Cells: []hived.CellView{
				{Name: "vision/socket2.0", Type: "socket2", Level: "socket", GPUs: 2, State: hived.StateUsed, Used: 1, VC: "vision", Bound: "n1/socket0", Node: "n1", Jobs: []core.JobKey{key("v")}},
				{Name: "vision/socket2.0/gpu.0", Parent: "vision/socket2.0", Type: "gpu", Level: "gpu", GPUs: 1, State: hived.StateUsed, Used: 1, VC: "vision", Bound: "g0", Node: "n1", Jobs: []core.JobKey{key("v")}},
				{Name: "vision/socket2.0/gpu.1", Parent: "vision/socket2.0", Type: "gpu", Level: "gpu", GPUs: 1, State: hived.StateReserved, VC: "vision", Bound: "g1", Node: "n1"},
			},
		}},
		GPUCells: map[string]hived.CellView{
			"g0": {Name: "g0", VC: "vision", Bound: "vision/socket2.0/gpu.0"},
			"g1": {Name: "g1", VC: "vision", Bound: "vision/socket2.0/gpu.1"},
		},
	}
	return v
}

// themisFixture is fixture's view under Themis after an auction round at
// t0: app a (2 GPUs, in one machine, 30 s lease) and sweep s (leftovers)
// won; c bid and lost.
func themisFixture() planner.View {
	v := fixture()
	v.Policy = "themis"
	v.Auction = &arbiter.RoundReport{At: t0, Round: 4, Offer: 6, Apps: []arbiter.AppReport{
		{App: "a", Rho: 3.5, RhoAfter: 1.25, Bid: true, Won: 2, Placed: "machine", C: 1, Lease: 30},
		{App: "c", Rho: 2.75, Bid: true},
		{App: "s", Rho: 1.5, RhoAfter: 1.1, Won: 1, Placed: "machine", Lease: 30},
	}}
	return v
}

// leader is a server that leads and has published v.
func leader(t *testing.T, views ...planner.View) (*Server, *httptest.Server) {
	t.Helper()
	s := New(Options{ID: "p1", API: "http://p1:4680", Version: "themis-nomad v0.1.0 (3f2a9c1e7b4d, go1.24.4)"})
	s.SetLeading(true)
	for _, v := range views {
		s.Publish(v)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// get fetches path and decodes the JSON body into a generic value.
func get(t *testing.T, ts *httptest.Server, path string) (int, http.Header, any) {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if resp.Header.Get("Content-Type") == "application/json" {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, b)
		}
	} else {
		v = string(b)
	}
	return resp.StatusCode, resp.Header, v
}

// at walks a decoded JSON value: keys for objects, indexes for arrays.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %v is not an object", path, v)
			}
			v = m[p]
		case int:
			a, ok := v.([]any)
			if !ok || p >= len(a) {
				t.Fatalf("at %v: %v is not an array of more than %d", path, v, p)
			}
			v = a[p]
		}
	}
	return v
}

// gangFixture is a view with a two-node gang holding one GPU on each node.
func gangFixture() planner.View {
	return planner.View{
		Time: t0, Decided: true, Policy: "fifo", Placement: "free",
		Nodes: []core.Node{
			{ID: "n1", Name: "node-1", Schedulable: true, GPUs: []core.GPU{{ID: "a0", Healthy: true}}},
			{ID: "n2", Name: "node-2", Schedulable: true, GPUs: []core.GPU{{ID: "b0", Healthy: true}}},
		},
		Leases: []lease.JobLease{{LeaseID: "L-g", Namespace: "default", JobID: "g", NodeID: "n1", NodeName: "node-1",
			GPUs: []string{"a0", "b0"}, GrantedAt: t0, Parts: []lease.Part{
				{NodeID: "n1", NodeName: "node-1", GPUs: []string{"a0"}}, {NodeID: "n2", NodeName: "node-2", GPUs: []string{"b0"}}}}},
		Jobs: []planner.JobView{{Key: key("g"), Valid: true, GPUs: 2, Status: lease.JobStatus{State: "granted", Node: "node-1,node-2"}}},
	}
}
