package nodesim_test

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/nodesim"
	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/stack"
)

// A preempted job resumes where it stopped on a simulated node: on one
// 8-GPU node, tiresias-las (first queue up to 16 GPU-seconds) runs job
// "long" (8 GPUs, 12 s); "short" (8 GPUs, 2 s) arrives once long was
// demoted and preempts it: the planner suspends long (Nomad stops its
// allocation, the simulator reports it complete and keeps the time it
// ran), short runs and completes, then long is granted again and its new
// allocation runs only the rest, so long's allocations ran about 12 s in
// all, not 12 s more. The invariant watcher sees no violation.
func TestNodesimPreemptedJobResumes(t *testing.T) {
	h := startServer(t, 1)
	sim := startNodes(t, h, nodesim.Cluster(1, 1))
	waitNodes(t, h, 1, 30*time.Second)
	violations := watch(t, h)
	knobs, err := core.ParseKnobs([]string{"tiresias.queues=16s"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Build("tiresias-las", stack.Options{Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	p := planner.New(planner.Config{Nomad: nomad.NewClient(h.nomad, "", h.log.Named("nomad")), Store: consul.NewStore(h.consul),
		Stack: st, Resync: 2 * time.Second, MaxKillTimeout: 30 * time.Minute, RestoreGuard: time.Second, Log: h.log.Named("planner")})
	serve(t, h, p)
	if _, _, err := h.nomad.Jobs().Register(Job("long", 8, "12s"), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "long running", func() (bool, error) { return ran(h, "long") > 0, nil })
	time.Sleep(4 * time.Second) // past 16 GPU-seconds: demoted
	if _, _, err := h.nomad.Jobs().Register(Job("short", 8, "2s"), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "both jobs complete", func() (bool, error) {
		return completed(h, "long") && completed(h, "short"), nil
	})
	allocs, _, err := h.nomad.Jobs().Allocations("long", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) < 2 {
		t.Fatalf("long has %d allocation(s): it was not preempted", len(allocs))
	}
	total := ranFor(h, "long")
	if total < 11*time.Second || total > 15*time.Second {
		t.Errorf("long's allocations ran %s in all, want about 12 s (resumed, not restarted)", total)
	}
	shortEnd, longEnd := finishedAt(h, "short"), finishedAt(h, "long")
	if !shortEnd.Before(longEnd) {
		t.Errorf("short finished at %s, after long at %s: it did not preempt", shortEnd, longEnd)
	}
	if st := sim.Stats(); st.Stopped < 1 {
		t.Errorf("simulator stopped no allocation: %+v", st)
	}
	if v := violations(); v != 0 {
		t.Errorf("%d invariant violations", v)
	}
}

func jobAllocs(h *harness, id string) []*nomadapi.AllocationListStub {
	allocs, _, _ := h.nomad.Jobs().Allocations(id, true, nil)
	return allocs
}

// ran is how many of the job's allocations started.
func ran(h *harness, id string) int {
	n := 0
	for _, a := range jobAllocs(h, id) {
		if ts := a.TaskStates["train"]; ts != nil && !ts.StartedAt.IsZero() {
			n++
		}
	}
	return n
}

func completed(h *harness, id string) bool {
	job, _, err := h.nomad.Jobs().Info(id, nil)
	if err != nil || job.Status == nil || *job.Status != "dead" {
		return false
	}
	var last *nomadapi.AllocationListStub
	for _, a := range jobAllocs(h, id) {
		if last == nil || a.CreateTime > last.CreateTime {
			last = a
		}
	}
	if last == nil {
		return false
	}
	ts := last.TaskStates["train"]
	// The last allocation ran its course: it finished, and the job is
	// not merely suspended (count 0).
	return last.ClientStatus == "complete" && ts != nil && !ts.FinishedAt.IsZero() && job.TaskGroups[0].Count != nil && *job.TaskGroups[0].Count > 0
}

func ranFor(h *harness, id string) time.Duration {
	var d time.Duration
	for _, a := range jobAllocs(h, id) {
		if ts := a.TaskStates["train"]; ts != nil && !ts.StartedAt.IsZero() && !ts.FinishedAt.IsZero() {
			d += ts.FinishedAt.Sub(ts.StartedAt)
		}
	}
	return d
}

func finishedAt(h *harness, id string) time.Time {
	var end time.Time
	for _, a := range jobAllocs(h, id) {
		if ts := a.TaskStates["train"]; ts != nil && ts.FinishedAt.After(end) {
			end = ts.FinishedAt
		}
	}
	return end
}
