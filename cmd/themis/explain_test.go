package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
)

var explainView = func(v viewCommand) cli.Command { return &explainCommand{v} }

// themis job explain on a waiting, a preempted, a running and a failed
// job of the scripted round: the queue and what is ahead, what would let
// it run, the preemption and the lease; an unknown job is an error.
func TestJobExplain(t *testing.T) {
	api := scriptedAPI(t)
	for _, tc := range []struct {
		job   string
		check func(t *testing.T, x explanation)
		table []string
	}{
		{"later", func(t *testing.T, x explanation) {
			if x.State != "queued" || x.VC != "vision" || x.Position != 2 || len(x.Ahead) != 1 || x.Ahead[0].Job != "default/wait" {
				t.Errorf("%+v", x)
			}
		}, []string{"Queue        position 2 in virtual cluster vision's queue", "1. default/wait (4 GPUs, waiting)",
			"4 GPUs free on node-2 now: it waits for its turn, not for room (1 job ahead of it, asking for 4 GPUs)",
			`another virtual cluster: speech has 4 GPUs free in its cells (themis.vc = "speech"`,
			"default/victim's 1 GPU on node-1 free up by " + clock(v0.Add(30e9)),
			"default/run's lease of 2 GPUs on node-1 ends at " + clock(v0.Add(300e9))}},
		{"default/wait", func(t *testing.T, x explanation) {
			if x.State != "waiting" || x.Position != 1 || len(x.Ahead) != 0 || x.Request == nil || x.Request.GPUs != 4 ||
				len(x.BlockedBy) != 1 || x.BlockedBy[0].Job != "default/victim" || !x.BlockedBy[0].Revoking || !x.BlockedBy[0].Until.Equal(v0.Add(30e9)) {
				t.Errorf("%+v", x)
			}
		}, []string{"nothing: it is first, and waits on the leases below",
			"Waiting on\n  default/victim: 1 GPU on node-1, lease L-victim; being preempted: its GPUs are free by " + clock(v0.Add(30e9)) + "\n",
			"fewer GPUs: virtual cluster vision has 1 GPU free in its cells (3 of 4 in use); asking for 1 (themis.gpus = 1) would fit them",
			"as an opportunistic job (themis.priority = -1, if its namespace may run them) it could use the 4 GPUs free on node-2 now"}},
		{"sus", func(t *testing.T, x explanation) {
			if x.State != "suspended" || x.Preemptions != 1 || len(x.Preempted) != 1 || x.VC != "speech" {
				t.Errorf("%+v", x)
			}
		}, []string{"Preemptions  1", "Preempted at " + clock(v0.Add(-60e9)) + " on node-2: preempted by fitgpp for default/wait"}},
		{"victim", func(t *testing.T, x explanation) {
			if x.State != "revoking" || x.Lease == nil || x.Lease.Revoke == nil || x.Position != 0 {
				t.Errorf("%+v", x)
			}
		}, []string{"Preempted    preempted by fitgpp for default/wait; checkpointing until " + clock(v0.Add(30e9))}},
		{"run", func(t *testing.T, x explanation) {
			if x.State != "granted" || x.Lease == nil || x.Lease.LeaseID != "L-run" || len(x.Options) != 0 {
				t.Errorf("%+v", x)
			}
		}, []string{"Lease        L-run: 2 GPUs on node-1 (n1-g0,n1-g1), granted " + clock(v0.Add(-3600e9)) + ", ends " + clock(v0.Add(300e9))}},
		{"crash", func(t *testing.T, x explanation) {
			if x.State != "failed" || !strings.Contains(x.Reason, "permission denied") {
				t.Errorf("%+v", x)
			}
		}, []string{"State        failed", `Why          task "t": Driver Failure: permission denied`}},
	} {
		t.Run(tc.job, func(t *testing.T) {
			code, out, errOut := runView(explainView, "-address", api, "-json", tc.job)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var x explanation
			if err := json.Unmarshal([]byte(out), &x); err != nil {
				t.Fatal(err)
			}
			tc.check(t, x)
			_, out, _ = runView(explainView, "-address", api, tc.job)
			for _, want := range tc.table {
				if !strings.Contains(out, want) {
					t.Errorf("lacks %q:\n%s", want, out)
				}
			}
		})
	}
	code, _, errOut := runView(explainView, "-address", api, "nope")
	if code != 1 || !strings.Contains(errOut, "no themis job default/nope") {
		t.Errorf("an unknown job: exit %d, %s", code, errOut)
	}
	code, _, errOut = runView(explainView, "-address", api)
	if code != 2 || !strings.Contains(errOut, "give one job") {
		t.Errorf("no job: exit %d, %s", code, errOut)
	}
}

// A job first in its queue that waits for GPUs other jobs' leases hold is
// told which leases those are and when each ends (a lease for a time, one
// being preempted, one with no end), soonest first, rather than "Ahead of
// it: nothing"; a job with room waits on none.
func TestJobExplainNamesTheLeasesItWaitsOn(t *testing.T) {
	k := func(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }
	var nodes []core.Node
	for n, name := range []string{"node-0", "node-1"} {
		node := core.Node{ID: "n" + name, Name: name, Schedulable: true}
		for i := range 4 {
			node.GPUs = append(node.GPUs, core.GPU{ID: name + "-g" + string(rune('0'+i)), Index: i, Healthy: true})
		}
		if n == 1 {
			node.GPUs = node.GPUs[:2] // node-1 has 2 GPUs, both free
		}
		nodes = append(nodes, node)
	}
	revoke := &lease.Revoke{Reason: "preempted by fitgpp for default/other", Since: v0, Deadline: v0.Add(20 * time.Second)}
	view := planner.View{Time: v0, Decided: true, Policy: "fitgpp", Nodes: nodes,
		Leases: []lease.JobLease{
			{LeaseID: "L-forever", Namespace: "default", JobID: "forever", NodeID: "nnode-0", NodeName: "node-0", GPUs: []string{"node-0-g0", "node-0-g1"}, GrantedAt: v0.Add(-time.Hour)},
			{LeaseID: "L-timed", Namespace: "default", JobID: "timed", NodeID: "nnode-0", NodeName: "node-0", GPUs: []string{"node-0-g2"}, GrantedAt: v0.Add(-time.Hour), Ends: v0.Add(7 * time.Minute)},
			{LeaseID: "L-stopping", Namespace: "default", JobID: "stopping", NodeID: "nnode-0", NodeName: "node-0", GPUs: []string{"node-0-g3"}, GrantedAt: v0.Add(-time.Hour), Revoke: revoke},
		},
		Jobs: []planner.JobView{
			{Key: k("forever"), Valid: true, GPUs: 2, Class: "be", Status: lease.JobStatus{State: "granted", Node: "node-0", Since: v0}},
			{Key: k("timed"), Valid: true, GPUs: 1, Class: "be", Status: lease.JobStatus{State: "granted", Node: "node-0", Since: v0}},
			{Key: k("stopping"), Valid: true, GPUs: 1, Class: "be", Status: lease.JobStatus{State: "revoking", Reason: revoke.Reason, Deadline: revoke.Deadline, Since: v0}},
			{Key: k("big"), Valid: true, GPUs: 4, Class: "be", Status: lease.JobStatus{State: "queued", Reason: "head of the fitgpp queue: waiting for 4 free GPUs (2 free)", Since: v0}},
			{Key: k("small"), Valid: true, GPUs: 2, Class: "be", Status: lease.JobStatus{State: "queued", Reason: "behind default/big", Since: v0}},
		},
		Queue: []planner.Queued{
			{Job: k("big"), Position: 1, GPUs: 4, State: "queued", Reason: "head of the fitgpp queue: waiting for 4 free GPUs (2 free)"},
			{Job: k("small"), Position: 2, GPUs: 2, State: "queued", Reason: "behind default/big"},
		},
	}
	s := httpapi.New(httpapi.Options{ID: "p1"})
	s.SetLeading(true)
	s.Publish(view)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	code, out, errOut := runView(explainView, "-address", ts.URL, "big")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "Ahead of it\n  nothing: it is first, and waits on the leases below\n\n" +
		"Waiting on\n" +
		"  default/stopping: 1 GPU on node-0, lease L-stopping; being preempted: its GPUs are free by " + clock(v0.Add(20*time.Second)) + "\n" +
		"  default/timed: 1 GPU on node-0, lease L-timed; its lease ends at " + clock(v0.Add(7*time.Minute)) + "\n" +
		"  default/forever: 2 GPUs on node-0, lease L-forever; its lease has no end: held until its job ends or the fitgpp policy preempts it\n"
	if !strings.Contains(out, want) {
		t.Errorf("explain big:\n%s\nwant it to contain\n%s", out, want)
	}
	code, out, _ = runView(explainView, "-address", ts.URL, "-json", "big")
	var x explanation
	if err := json.Unmarshal([]byte(out), &x); code != 0 || err != nil || len(x.BlockedBy) != 3 || x.BlockedBy[2].Job != "default/forever" || !x.BlockedBy[2].Until.IsZero() {
		t.Errorf("explain -json big: exit %d, %v, %+v", code, err, x.BlockedBy)
	}
	// small fits on node-1 now: it waits for its turn, on no lease.
	_, out, _ = runView(explainView, "-address", ts.URL, "small")
	if strings.Contains(out, "Waiting on") {
		t.Errorf("explain small names leases, though node-1 has room:\n%s", out)
	}
}
