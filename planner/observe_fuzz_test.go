package planner

import (
	"context"
	"encoding/json"
	"github.com/themis-nomad/themis/planner/plannertest"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// No job can stop a round (docs/adversary.md, part 1): whatever ID,
// namespace, driver, meta, stanza values and device request a user's job
// carries, a round through the fakes neither fails nor panics, and the good
// job submitted after it is granted. The job is shaped from the fuzzer's
// values the way a user's jobspec could shape it (Nomad only refuses an
// empty ID or one with a space or NUL, and a namespace outside
// [a-zA-Z0-9-]{1,128}; the fakes take any).
//
//	go test ./planner -run '^$' -fuzz FuzzObserveHostileJob -fuzztime 60s
func FuzzObserveHostileJob(f *testing.F) {
	f.Add("wedge/allocations", "default", "themis", "themis.gpus", "2", "gpus", "2", "", int64(1), true)
	f.Add("..", "team", "raw_exec", "themis.gpus", "1", "vc", "a", "themis/gpu", int64(4), false)
	f.Add("x\x1b[2Jy", "default", "themis", "themis.lease", "L", "priority", "1000", "gpu", int64(2), true)
	f.Add("x", "default", "themis", "themis.lease_id", "L", "priority", "1", "", int64(1), true)
	f.Add("j", "default", "docker", "themis.suspended", "L", "grace_period", "99999h", "nvidia/gpu", int64(1), false)
	f.Add("j", "", "exec", "themis.gang", "3", "gpus", "-1", "", int64(0), true)
	f.Add("good", "default", "themis", "themis.count", "8", "class", "te", "themis/gpu/a100", int64(1), true)
	f.Add("j", "default", "themis", "themis.restart_count", "x", "checkpoint_signal", "SIGKILL", "", int64(1), false)
	f.Add("j", "default", "themis", "themis.gpus", "1e9", "iterations", "NaN", "", int64(-1), true)
	f.Add("j", "default", "themis", "k", "v", "", `[{"gpus": [1]}, null]`, "", int64(1), false)
	f.Add("j", "default", "themis", "k", "v", "", `"gpus = 2"`, "", int64(1), false)
	f.Add("j", "default", "themis", "k", "v", "gpus", `{"a": null}`, "", int64(1), true)
	f.Fuzz(func(t *testing.T, id, ns, driver, metaKey, metaVal, field, value, deviceName string, count int64, inStanza bool) {
		if id == "" || (id == "good" && (ns == "" || ns == "default")) {
			return // Nomad requires an ID; the good job's own key
		}
		h := newHarness(t, 8, stack.Of(policies.FIFO{}))
		h.Nomad.Submit("good", 1, "be", "10s")
		h.Nomad.Jobs[core.JobKey{Namespace: ns, ID: id}] = hostileJob(id, ns, driver, metaKey, metaVal, field, value, deviceName, count, inStanza, h.Nomad.Index+1)
		h.Nomad.Index++
		for range 2 {
			if err := h.P.Reconcile(context.Background()); err != nil {
				t.Fatalf("a round failed: %v", err)
			}
			plannertest.CheckNoTaskWithoutLease(t, h.Nomad, h.Store, "fuzz")
			h.Nomad.Settle()
			h.Clock = h.Clock.Add(1e9)
		}
		if _, ok := h.Store.JobLeases[core.JobKey{Namespace: "default", ID: "good"}]; !ok {
			t.Fatalf("the good job was not granted: %+v", h.Store.JobStatuses[core.JobKey{Namespace: "default", ID: "good"}])
		}
	})
}

// hostileJob is a job shaped by the fuzzer: its stanza (in the themis
// driver's config, or in task meta for another driver) asks for one GPU and
// sets field to value (decoded as JSON where it is JSON: Nomad's API
// hands the planner a task's config as JSON; with no field, value is the
// whole block); meta sets metaKey to metaVal on the job, group and
// task; the task asks for count devices of deviceName.
func hostileJob(id, ns, driver, metaKey, metaVal, field, value, deviceName string, count int64, inStanza bool, index uint64) *api.Job {
	meta := map[string]string{metaKey: metaVal}
	task := &api.Task{Name: "t", Driver: driver, Meta: meta}
	stanza := map[string]any{"gpus": float64(1)}
	var v any = value
	if json.Unmarshal([]byte(value), &v) != nil {
		v = value // not JSON: the string itself
	}
	if inStanza {
		stanza[field] = v
	}
	switch {
	case driver == nomad.DriverName && field == "":
		task.Config = map[string]any{"command": "train", "themis": v} // the block itself, any shape
	case driver == nomad.DriverName:
		task.Config = map[string]any{"command": "train", "themis": []any{stanza}}
	default:
		task.Meta = map[string]string{metaKey: metaVal, "themis.gpus": "1"}
		if inStanza {
			task.Meta["themis."+field] = value
		}
	}
	if deviceName != "" {
		n := uint64(count)
		task.Resources = &api.Resources{Devices: []*api.RequestedDevice{{Name: deviceName, Count: &n}}}
	}
	return &api.Job{
		ID: ptr(id), Namespace: ptr(ns), Status: ptr("pending"), NodePool: ptr(nomad.DefaultPendingPool),
		JobModifyIndex: ptr(index), SubmitTime: ptr(int64(0)), Meta: map[string]string{metaKey: metaVal},
		TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Count: ptr(1), Meta: meta, Tasks: []*api.Task{task}}},
	}
}
