package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/cli"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
)

// devClusterView is a round on the dev cluster of `themis dev -clients 3`
// (examples/topology/dev-cluster.hcl: three 8-GPU nodes, GPU ids
// SIM-<node>-<index>): an 8-GPU job holding node-0, a 16-GPU gang on
// node-1 and node-2 being preempted for a te job granted its GPUs, a job
// suspended and one queued behind them, with the reasons the planner
// writes.
func devClusterView() (planner.View, []lease.JobStatus) {
	k := func(id string) core.JobKey { return core.JobKey{Namespace: "default", ID: id} }
	var nodes []core.Node
	ids := map[string][]string{}
	for n := range 3 {
		name := fmt.Sprintf("node-%d", n)
		node := core.Node{ID: fmt.Sprintf("9f1c2e4a-0b6d-4c1e-8a2f-%012d", n), Name: name, Rack: fmt.Sprintf("rack%d", n/2), Schedulable: true}
		for i := range 8 {
			id := fmt.Sprintf("SIM-%s-%d", name, i)
			node.GPUs = append(node.GPUs, core.GPU{ID: id, Index: i, Healthy: true,
				Path: []string{fmt.Sprintf("socket%d", i/4), fmt.Sprintf("switch%d", i/2), fmt.Sprintf("pair%d", i/2)}})
			ids[name] = append(ids[name], id)
		}
		nodes = append(nodes, node)
	}
	deadline := v0.Add(30 * time.Second)
	revoke := &lease.Revoke{Reason: "preempted by themis for default/llama-finetune-te (its lease ended at 10:00:00 and the auction gave its GPUs to others)",
		Since: v0, Deadline: deadline}
	gang := append(append([]string{}, ids["node-1"]...), ids["node-2"]...)
	leases := []lease.JobLease{
		{LeaseID: "3b0d6f7e-8c1a-4f2b-9d3e-5a6b7c8d9e0f", Namespace: "default", JobID: "resnet50-imagenet-8gpu", NodeID: nodes[0].ID, NodeName: "node-0",
			GPUs: ids["node-0"], GrantedAt: v0.Add(-time.Hour), Ends: v0.Add(10 * time.Minute)},
		{LeaseID: "7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918", Namespace: "default", JobID: "bert-large-pretrain-16", NodeID: nodes[1].ID, NodeName: "node-1",
			GPUs: gang, GrantedAt: v0.Add(-2 * time.Hour), Revoke: revoke,
			Parts: []lease.Part{{NodeID: nodes[1].ID, NodeName: "node-1", GPUs: ids["node-1"]}, {NodeID: nodes[2].ID, NodeName: "node-2", GPUs: ids["node-2"]}}},
	}
	waitWhy := fmt.Sprintf("granted 16 GPUs on node-1,node-2; waiting for default/bert-large-pretrain-16 to stop (checkpointing, grace period until %s)", clock(deadline))
	sts := []lease.JobStatus{
		{Namespace: "default", JobID: "resnet50-imagenet-8gpu", State: "granted", Node: "node-0", GPUs: ids["node-0"], LeaseID: leases[0].LeaseID, Since: v0.Add(-time.Hour),
			Driver: "docker"},
		{Namespace: "default", JobID: "bert-large-pretrain-16", State: "revoking", Node: "node-1,node-2", GPUs: gang, LeaseID: leases[1].LeaseID,
			Reason: revoke.Reason, Deadline: deadline, Preemptions: 2, Since: v0},
		{Namespace: "default", JobID: "llama-finetune-te", State: "queued", Node: "node-1,node-2", GPUs: gang, Reason: waitWhy, Since: v0},
		{Namespace: "default", JobID: "resnet50-imagenet-8gpu-b", State: "suspended", Reason: "waiting for 8 free GPUs on as few nodes as possible (0 free)",
			Preemptions: 1, Held: "suspended: preempted by themis", Since: v0.Add(-time.Minute)},
		{Namespace: "default", JobID: "whisper-small-eval", State: "queued", Held: "queued: held by the themis planner", Since: v0,
			Reason: "behind default/llama-finetune-te and default/vit-huge-sweep-17 in the themis queue (8 GPUs wanted, 0 free)"},
	}
	var jobs []planner.JobView
	var queue []planner.Queued
	for i, st := range sts {
		jobs = append(jobs, planner.JobView{Key: st.Key(), Valid: true, GPUs: max(len(st.GPUs), 8), Class: "be", Status: st})
		if st.State == "queued" || st.State == "suspended" {
			queue = append(queue, planner.Queued{Job: st.Key(), Position: i - 1, GPUs: max(len(st.GPUs), 8), State: st.State, Reason: st.Reason, Held: st.Held})
		}
	}
	return planner.View{Time: v0, Decided: true, Policy: "themis", Nodes: nodes, Leases: leases, Jobs: jobs, Queue: queue,
		Events: []planner.Event{{Time: v0, Kind: planner.EventPreempt, Job: k("bert-large-pretrain-16"), Node: "node-1", GPUs: gang, Reason: revoke.Reason}}}, sts
}

// No table line of themis status, queue, nodes or leases is wider than 160
// columns on the 3-node, 8-GPU dev cluster: the tables write GPU lists as
// ranges or counts and cut long reasons; -verbose lists every GPU id and
// the whole reason, and -json is the API's document, every id in it.
func TestTablesFitTheDevCluster(t *testing.T) {
	view, sts := devClusterView()
	s := httpapi.New(httpapi.Options{ID: "p1"})
	s.SetLeading(true)
	s.Publish(view)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	// Progress as the hello workload reports it (the widest cell the
	// dev cluster showed: 105/100000 it, 10.1 it/s, loss 2.29).
	loss := 2.2912
	progress := map[core.JobKey]lease.ProgressRecord{}
	for _, st := range sts {
		if st.State != "queued" {
			progress[st.Key()] = lease.ProgressRecord{Namespace: st.Namespace, JobID: st.JobID, Iteration: 105, Total: 100000, Rate: 10.13, Loss: &loss, At: v0}
		}
	}
	status := func(verbose bool) string {
		var b bytes.Buffer
		printStatuses(&b, append([]lease.JobStatus(nil), sts...), progress, verbose)
		return b.String()
	}
	tables := map[string]string{"status": status(false)}
	for name, cmd := range map[string]func(viewCommand) cli.Command{
		"queue": queueView, "nodes": nodesView, "leases": leasesView,
	} {
		code, out, errOut := runView(cmd, "-address", ts.URL)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		tables[name] = out
	}
	for name, out := range tables {
		for _, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > tableWidth {
				t.Errorf("%s: a line of %d columns (over %d):\n%s\n---\n%s", name, n, tableWidth, l, out)
			}
		}
	}
	if !strings.Contains(tables["status"], "SIM-node-0-[0-7]") || !strings.Contains(tables["status"], "16 GPUs") {
		t.Errorf("status: want node-0's GPUs as SIM-node-0-[0-7] and the gang's as 16 GPUs:\n%s", tables["status"])
	}
	verbose := status(true)
	if !strings.Contains(verbose, strings.Join(view.Leases[1].GPUs, ",")) || !strings.Contains(verbose, sts[2].Reason) ||
		!strings.Contains(verbose, "105/100000 it, 10.1 it/s, loss 2.29") {
		t.Errorf("status -verbose: want every GPU id, the whole reason and the iterations:\n%s", verbose)
	}
	if !strings.Contains(tables["status"], "0.105%, 10.1 it/s, loss 2.29") {
		t.Errorf("status: want the progress as a share of the total:\n%s", tables["status"])
	}
	code, out, _ := runView(leasesView, "-address", ts.URL, "-verbose")
	if code != 0 || !strings.Contains(out, strings.Join(view.Leases[1].GPUs, ",")) || !strings.Contains(out, view.Leases[1].Revoke.Reason) {
		t.Errorf("leases -verbose: exit %d, want every GPU id and the whole reason:\n%s", code, out)
	}
	code, out, _ = runView(leasesView, "-address", ts.URL, "-json")
	if code != 0 || !strings.Contains(out, `"SIM-node-2-7"`) {
		t.Errorf("leases -json: exit %d, want every GPU id:\n%s", code, out)
	}
}

// shortGPUs writes ranges where the ids end in their index, one group per
// prefix, and a count where they do not (GPU UUIDs) or the ranges are long.
func TestShortGPUs(t *testing.T) {
	uuid := func(i int) string { return fmt.Sprintf("GPU-5f8e2c1a-9b3d-4e6f-a7c8-%012x", 0xd9e0f1a2b3c4+i*7919) }
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{nil, ""},
		{[]string{"SIM-node-0-3"}, "SIM-node-0-3"},
		{[]string{uuid(0)}, uuid(0)},
		{[]string{"SIM-node-0-0", "SIM-node-0-1", "SIM-node-0-2", "SIM-node-0-3"}, "SIM-node-0-[0-3]"},
		{[]string{"SIM-node-0-6", "SIM-node-0-0", "SIM-node-0-1", "SIM-node-0-3"}, "SIM-node-0-[0-1,3,6]"},
		{[]string{"SIM-node-0-7", "SIM-node-1-0"}, "SIM-node-0-7,SIM-node-1-0"},
		{[]string{"SIM-node-0-6", "SIM-node-0-7", "SIM-node-1-0", "SIM-node-1-1"}, "4 GPUs"},
		{[]string{uuid(0), uuid(1), uuid(2)}, "3 GPUs"},
		{[]string{"gpu-a", "gpu-b"}, "2 GPUs"},
		{[]string{"g-01", "g-02"}, "2 GPUs"},
		{[]string{"MIG-GPU-5f8e2c1a-9b3d-4e6f-a7c8-d9e0f1a2b3c4/1/0"}, "1 GPU"},
	} {
		if got := shortGPUs(tc.ids); got != tc.want {
			t.Errorf("shortGPUs(%v) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}
