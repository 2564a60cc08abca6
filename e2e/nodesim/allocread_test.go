package nodesim_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/nodesim"
	"github.com/themis-nomad/themis/planner/nomadread"
)

// The allocation reader that reads in full only what changed
// (nomadread.Allocs, the planner's and the invariant watcher's) says what
// a full listing says: against a real Nomad server and simulated nodes,
// while 24 jobs are placed, run, complete and are garbage-collected, every
// read taken while the allocations table stood still has the same
// allocations, each with the same status, task states and devices, as
// Nomad's list of every allocation with its task states and resources.
// One reader reads up to 64 changed allocations one by one, the other up
// to 2 (more: it lists all in full).
func TestAllocReadSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	h := startServer(t, 6)
	startNodes(t, h, nodesim.Cluster(6, 6))
	waitNodes(t, h, 6, 30*time.Second)
	runPlanner(t, h, "fifo")
	readers := []*nomadread.Allocs{{Resources: true}, {Resources: true, MaxReads: 2}}

	compared, moved := 0, 0
	check := func() {
		t.Helper()
		for i, r := range readers {
			got, index, err := r.Read(ctx, h.nomad, false)
			if err != nil {
				t.Fatal(err)
			}
			want, meta, err := h.nomad.Allocations().List(&nomadapi.QueryOptions{Namespace: "*",
				Params: map[string]string{"task_states": "true", "resources": "true"}})
			if err != nil {
				t.Fatal(err)
			}
			if meta.LastIndex != index {
				moved++ // the table moved between the two: not comparable
				continue
			}
			compared++
			if g, w := allocsSeen(slices.Collect(maps.Values(got))), allocsSeen(want); !reflect.DeepEqual(g, w) {
				t.Fatalf("reader %d at index %d:\n%v\na full list:\n%v", i, index, g, w)
			}
		}
	}
	submit := func(from, to int) {
		for i := from; i < to; i++ {
			if _, _, err := h.nomad.Jobs().Register(Job(fmt.Sprintf("read-%02d", i), 8, "2s"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(what string, until func() (bool, error)) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			check()
			done, err := until()
			if err != nil {
				t.Fatal(err)
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 90 s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	complete := func(n int) func() (bool, error) {
		return func() (bool, error) {
			stubs, _, err := h.nomad.Allocations().List(&nomadapi.QueryOptions{Filter: `ClientStatus == "complete"`})
			return len(stubs) >= n, err
		}
	}
	submit(0, 12) // twice the nodes: half wait for the first half
	run("12 jobs complete", complete(12))
	submit(12, 24)
	run("24 jobs complete", complete(24))
	if err := h.nomad.System().GarbageCollect(); err != nil {
		t.Fatal(err)
	}
	run("every allocation garbage-collected", func() (bool, error) {
		stubs, _, err := h.nomad.Allocations().List(nil)
		return len(stubs) == 0, err
	})
	check()
	for i, r := range readers {
		t.Logf("reader %d: %d stubs listed in full, %d allocations read one by one", i, r.InFull, r.OneByOne)
		if r.OneByOne == 0 {
			t.Errorf("reader %d read no allocation on its own", i)
		}
	}
	t.Logf("%d reads compared, %d not (the table moved meanwhile)", compared, moved)
	if compared < 20 {
		t.Errorf("only %d reads compared", compared)
	}
}

// allocsSeen is what the planner and the watcher read of each allocation,
// one line each, by ID.
func allocsSeen(stubs []*nomadapi.AllocationListStub) []string {
	var out []string
	for _, s := range stubs {
		line := fmt.Sprintf("%s %s/%s node %s %s/%s modify %d", s.ID, s.Namespace, s.JobID, s.NodeID, s.DesiredStatus, s.ClientStatus, s.ModifyIndex)
		for name, ts := range s.TaskStates {
			line += fmt.Sprintf(" task %s %s started %s finished %s events %d", name, ts.State, ts.StartedAt.Format(time.RFC3339Nano), ts.FinishedAt.Format(time.RFC3339Nano), len(ts.Events))
		}
		if s.AllocatedResources != nil {
			for name, tr := range s.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					line += fmt.Sprintf(" %s devices %v", name, d.DeviceIDs)
				}
			}
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}
