package planner

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// A 16-GPU job on three 8-GPU nodes gets one lease of two equal parts, and
// Nomad runs it as one group of two allocations, one per node.
func TestGangLeaseAndPin(t *testing.T) {
	h := newClusterHarness(t, 3, 8, mustStack(t, "fifo", stack.Options{}))
	h.Nomad.Submit("gang", 16, "be", "10s")
	h.Round("grant")
	k := core.JobKey{Namespace: "default", ID: "gang"}
	l, ok := h.Store.JobLeases[k]
	if !ok {
		t.Fatalf("no lease; status %+v", h.Store.JobStatuses[k])
	}
	if len(l.Parts) != 2 || len(l.GPUs) != 16 {
		t.Fatalf("lease parts %+v, GPUs %v: want 2 parts of 8", l.Parts, l.GPUs)
	}
	for i, p := range l.Parts {
		if len(p.GPUs) != 8 || p.NodeName == "" {
			t.Fatalf("part %d: %+v", i, p)
		}
		// The node's themis driver's gang address, which the ranks check
		// the rendezvous records against.
		if want := "10.0.0." + strings.TrimPrefix(p.NodeID, "node-"); p.Addr != want {
			t.Fatalf("part %d on %s: address %q, want %q", i, p.NodeID, p.Addr, want)
		}
	}
	if l.NodeID != l.Parts[0].NodeID || l.Parts[0].NodeID == l.Parts[1].NodeID {
		t.Fatalf("lease node %s, parts on %s and %s", l.NodeID, l.Parts[0].NodeID, l.Parts[1].NodeID)
	}
	if got := strings.Count(h.Store.JobStatuses[k].Node, ","); got != 1 {
		t.Errorf("status names nodes %q, want both", h.Store.JobStatuses[k].Node)
	}
	job := h.Nomad.Jobs[k]
	if *job.TaskGroups[0].Count != 2 || job.Meta[nomad.GangMeta] != "2" {
		t.Fatalf("pinned count %d, gang meta %q", *job.TaskGroups[0].Count, job.Meta[nomad.GangMeta])
	}
	if n := len(h.Nomad.Running("gang")); n != 2 {
		t.Fatalf("%d allocations run, want 2", n)
	}
	// The pinned job (count 2) is not rejected, and the next rounds keep it.
	h.Round("steady")
	h.Round("steady")
	if st := h.Store.JobStatuses[k]; st.State != "granted" {
		t.Fatalf("status %+v", st)
	}
	// A third job of 8 GPUs fits the remaining node; a second gang waits.
	h.Nomad.Submit("small", 8, "be", "10s")
	h.Nomad.Submit("gang2", 16, "be", "10s")
	h.Round("more")
	if _, ok := h.Store.JobLeases[core.JobKey{Namespace: "default", ID: "small"}]; !ok {
		t.Fatalf("small not granted: %+v", h.Store.JobStatuses[core.JobKey{Namespace: "default", ID: "small"}])
	}
	if st := h.Store.JobStatuses[core.JobKey{Namespace: "default", ID: "gang2"}]; st.State != "queued" {
		t.Fatalf("gang2 %+v, want queued", st)
	}
	// The gang finishes: its lease is released and gang2 gets two nodes.
	h.Nomad.Finish("gang")
	h.Round("gang done")
	h.Round("gang2 granted")
	if l2, ok := h.Store.JobLeases[core.JobKey{Namespace: "default", ID: "gang2"}]; !ok || len(l2.Parts) != 2 {
		t.Fatalf("gang2 lease %+v, %v", l2, ok)
	}
}

// A gang whose part is lost (its node died) while the other part runs is
// taken back whole and re-queued; it runs again on two healthy nodes.
func TestGangPartLostTakesTheGangBack(t *testing.T) {
	h := newClusterHarness(t, 3, 8, mustStack(t, "fifo", stack.Options{}))
	h.Nomad.Submit("gang", 16, "be", "5s")
	h.Round("grant")
	k := core.JobKey{Namespace: "default", ID: "gang"}
	first := h.Store.JobLeases[k]
	lostNode := first.Parts[1].NodeID
	h.Nomad.LoseNode(lostNode, nomad.DefaultStopOnClientAfter+5*time.Second) // cut off: it stops the part by itself
	h.Round("part lost")
	l := h.Store.JobLeases[k]
	if l.Revoke == nil || !strings.Contains(l.Revoke.Reason, "gang broken") {
		t.Fatalf("lease after a lost part: %+v", l)
	}
	// Its lost part may still run: the gang's lease (all its GPUs) is
	// held until that node reports it stopped or the lost bound passes.
	for i := range 10 {
		h.Round("held " + strconv.Itoa(i))
	}
	if l := h.Store.JobLeases[k]; l.LeaseID != first.LeaseID {
		t.Fatalf("lease %+v released while the lost part may still run", l)
	}
	// The node stays down past the bound: the gang re-queues whole and
	// runs on the two other nodes.
	h.Clock = h.Clock.Add(nomad.DefaultStopOnClientAfter + 5*time.Second + LostMargin)
	h.Nomad.Settle() // the cut-off client stopped the part by then
	for i := range 10 {
		h.Round("requeue " + strconv.Itoa(i))
	}
	again, ok := h.Store.JobLeases[k]
	if !ok || again.LeaseID == first.LeaseID || again.Revoke != nil {
		t.Fatalf("not granted again: %+v (status %+v)", again, h.Store.JobStatuses[k])
	}
	if again.OnNode(lostNode) {
		t.Fatalf("granted again on the dead node: %s", again.NodeNames())
	}
	if n := len(h.Nomad.Running("gang")); n != 2 {
		t.Fatalf("%d parts run, want 2", n)
	}
	if rec := h.Store.JobRecords[k]; rec.Preemptions != 1 {
		t.Errorf("record counts %d preemptions, want 1 (the broken run)", rec.Preemptions)
	}
}

// A gang that Nomad does not place whole within the timeout is taken back.
func TestGangIncompletePlacementTimesOut(t *testing.T) {
	h := newClusterHarness(t, 2, 8, mustStack(t, "fifo", stack.Options{}))
	h.config.GangPlaceTimeout = 5 * time.Second
	h.Restart()
	h.Nomad.Submit("gang", 16, "be", "1s")
	h.Round("grant")
	k := core.JobKey{Namespace: "default", ID: "gang"}
	// Nomad placed only one part.
	as := h.Nomad.Allocs[k]
	as[1].ClientStatus, as[1].Started = "pending", time.Time{}
	h.Nomad.Allocs[k] = as[:1]
	for i := range 5 {
		h.Round(fmt.Sprint("waiting ", i))
		if l := h.Store.JobLeases[k]; l.Revoke != nil {
			t.Fatalf("taken back after %d s, before the timeout", i+1)
		}
	}
	h.Round("timeout")
	h.Round("timeout")
	if l := h.Store.JobLeases[k]; l.Revoke == nil || !strings.Contains(l.Revoke.Reason, "placed 1 of its 2 parts") {
		t.Fatalf("lease %+v, want revoked as incomplete", l)
	}
}

// A job's progress report gives it a remaining time in the core, which
// SRTF orders by; a job that reports nothing stays unknown (-1).
func TestProgressGivesRemainingTime(t *testing.T) {
	h := newClusterHarness(t, 1, 8, mustStack(t, "fifo", stack.Options{}))
	h.Nomad.Submit("reports", 2, "be", "5s")
	h.Nomad.Submit("silent", 2, "be", "5s")
	h.Store.ProgressRecords = map[core.JobKey]lease.ProgressRecord{
		{Namespace: "default", ID: "reports"}: {Namespace: "default", JobID: "reports", Iteration: 100, Total: 1100, Rate: 10},
	}
	state := observed(t, h.P)
	got := map[string]core.Job{}
	for _, j := range state.Jobs {
		got[j.Key.ID] = j
	}
	if j := got["reports"]; j.Remaining != 100 || j.Work != 110 {
		t.Errorf("reports: remaining %v, work %v; want 100 s of 110 s", j.Remaining, j.Work)
	}
	if j := got["silent"]; j.Remaining != -1 {
		t.Errorf("silent: remaining %v, want -1 (unknown)", j.Remaining)
	}
}

// A report is as old as the driver's last read of it: a job that still
// runs in the allocation that reported has run since, and its remaining
// time is counted from now; one whose report came from an earlier
// allocation (it was preempted since) keeps the report's figure.
func TestProgressAgesWhileTheJobRuns(t *testing.T) {
	h := newClusterHarness(t, 1, 8, mustStack(t, "fifo", stack.Options{}))
	h.Nomad.Submit("runs", 2, "be", "5s")
	h.Nomad.Submit("moved", 2, "be", "5s")
	h.Round("grant")
	allocOf := func(id string) string { return h.Nomad.Running(id)[0].ID }
	read := h.Clock
	h.Clock = h.Clock.Add(4 * time.Second)
	h.Store.ProgressRecords = map[core.JobKey]lease.ProgressRecord{
		{Namespace: "default", ID: "runs"}:  {Namespace: "default", JobID: "runs", AllocID: allocOf("runs"), Iteration: 100, Total: 1100, Rate: 10, At: read},
		{Namespace: "default", ID: "moved"}: {Namespace: "default", JobID: "moved", AllocID: "an-earlier-alloc", Iteration: 100, Total: 1100, Rate: 10, At: read},
	}
	state := observed(t, h.P)
	got := map[string]core.Job{}
	for _, j := range state.Jobs {
		got[j.Key.ID] = j
	}
	if j := got["runs"]; j.Remaining != 96 || j.Work != 110 {
		t.Errorf("runs: remaining %v, work %v; want 96 s (100 s 4 s ago) of 110 s", j.Remaining, j.Work)
	}
	if j := got["moved"]; j.Remaining != 100 {
		t.Errorf("moved: remaining %v, want the report's 100 s", j.Remaining)
	}
}

// Live FitGpp: a 16-GPU TE gang on two 8-GPU nodes, each held by an 8-GPU
// BE job, preempts both (no single victim makes room) and then runs as two
// parts; with a 4-GPU TE job on one node instead, it preempts nothing.
func TestGangFitGppPreemptsSeveralVictims(t *testing.T) {
	for _, tc := range []struct {
		name    string
		teSmall bool // a 4-GPU TE job holds half of the second node
		want    string
	}{{"two BE jobs", false, "[be-a be-b]"}, {"a TE job on a node", true, "[]"}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newClusterHarness(t, 2, 8, mustStack(t, "fitgpp", stack.Options{}))
			h.Nomad.Submit("be-a", 8, "be", "2s")
			if tc.teSmall {
				h.Nomad.Submit("te-small", 4, "te", "2s")
				h.Nomad.Submit("be-b", 4, "be", "2s")
			} else {
				h.Nomad.Submit("be-b", 8, "be", "2s")
			}
			for i := range 3 {
				h.Round(fmt.Sprintf("start %d", i))
			}
			for _, id := range []string{"be-a", "be-b"} {
				if len(h.Nomad.Running(id)) != 1 {
					t.Fatalf("%s not running: %+v", id, h.Store.JobStatuses[core.JobKey{Namespace: "default", ID: id}])
				}
			}
			h.Nomad.Submit("te", 16, "te", "2s")
			h.Round("te arrives")
			var revoked []string
			for _, id := range []string{"be-a", "be-b", "te-small"} {
				if l, ok := h.Store.JobLeases[core.JobKey{Namespace: "default", ID: id}]; ok && l.Revoke != nil {
					revoked = append(revoked, id)
				}
			}
			if fmt.Sprint(revoked) != tc.want {
				t.Fatalf("revoked %v, want %s", revoked, tc.want)
			}
			for i := range 5 {
				h.Round(fmt.Sprintf("after %d", i))
			}
			l, ok := h.Store.JobLeases[core.JobKey{Namespace: "default", ID: "te"}]
			if granted := ok && len(l.Parts) == 2; granted != (tc.want != "[]") {
				t.Fatalf("te lease %+v (%v); want granted %v", l, ok, tc.want != "[]")
			}
			if tc.want == "[]" && (len(h.Nomad.Running("be-a")) != 1 || len(h.Nomad.Running("be-b")) != 1) {
				t.Fatal("a BE job stopped though nothing was preempted")
			}
		})
	}
}

// observed is the decision core's state as p's next round would build it
// (read, then observe on the model: nothing is written).
func observed(t *testing.T, p *Planner) core.State {
	t.Helper()
	w, err := p.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := newRound(w)
	r.plan = &plan{}
	return p.observe(r)
}
