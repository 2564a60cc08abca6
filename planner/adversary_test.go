package planner

import (
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// device is a task's request for n devices of a name.
func device(name string, n uint64) *api.RequestedDevice {
	return &api.RequestedDevice{Name: name, Count: &n}
}

// The whole-job check (docs/adversary.md, part 2): a job that asks for GPUs
// (or any device) anywhere its lease does not reach, whose launches would
// copy its pin, or that carries meta only the planner writes, is rejected
// with a reason naming the group, task and block; it is never granted, and
// the good job submitted after it is.
func TestPinPlacesOnlyWhatWasLeased(t *testing.T) {
	side := func(j *api.Job, d *api.RequestedDevice) {
		j.TaskGroups = append(j.TaskGroups, &api.TaskGroup{Name: ptr("side"), Count: ptr(1), Tasks: []*api.Task{
			{Name: "grab", Driver: "raw_exec", Config: map[string]any{"command": "grab"}, Resources: &api.Resources{Devices: []*api.RequestedDevice{d}}}}})
	}
	themisTask := func(j *api.Job) *api.Task { return j.TaskGroups[0].Tasks[0] }
	cases := []struct {
		name  string
		shape func(j *api.Job)
		names []string
	}{
		{"a second group asks for themis GPUs", func(j *api.Job) { side(j, device("themis/gpu", 4)) },
			[]string{`group "side" task "grab"`, `device "themis/gpu"`}},
		{"a second group asks for any vendor's GPUs", func(j *api.Job) { side(j, device("gpu", 2)) },
			[]string{`group "side" task "grab"`, `device "gpu"`}},
		{"device gpu in the themis task", func(j *api.Job) {
			themisTask(j).Resources = &api.Resources{Devices: []*api.RequestedDevice{device("gpu", 2)}}
		}, []string{`group "g" task "t"`, `device "gpu"`}},
		{"device nvidia/gpu in the themis task", func(j *api.Job) {
			themisTask(j).Resources = &api.Resources{Devices: []*api.RequestedDevice{device("themis/gpu", 1), device("nvidia/gpu", 1)}}
		}, []string{`group "g" task "t"`, `device "nvidia/gpu"`}},
		{"a sidecar in the themis group asks for a GPU", func(j *api.Job) {
			j.TaskGroups[0].Tasks = append(j.TaskGroups[0].Tasks, &api.Task{Name: "sidecar", Driver: "raw_exec",
				Lifecycle: &api.TaskLifecycle{Hook: "prestart", Sidecar: true}, Resources: &api.Resources{Devices: []*api.RequestedDevice{device("amd/gpu", 1)}}})
		}, []string{`group "g" task "sidecar"`, `device "amd/gpu"`}},
		{"another device, unleased", func(j *api.Job) { side(j, device("xilinx/fpga", 1)) },
			[]string{`group "side" task "grab"`, `device "xilinx/fpga"`}},
		{"periodic: every launch copies the pin", func(j *api.Job) { j.Periodic = &api.PeriodicConfig{Spec: ptr("* * * * *")} },
			[]string{`periodic`}},
		{"parameterized: every dispatch copies the pin", func(j *api.Job) { j.ParameterizedJob = &api.ParameterizedJobConfig{} },
			[]string{`parameterized`}},
		{"themis.gang lets a count of 3 through", func(j *api.Job) {
			j.TaskGroups[0].Count, j.Meta["themis.gang"] = ptr(3), "3"
		}, []string{`meta "themis.gang"`}},
		{"themis.lease_id without a lease", func(j *api.Job) { j.Meta["themis.lease_id"] = "0c2f" },
			[]string{`meta "themis.lease_id"`}},
		{"themis.lease (the old spelling) without a lease", func(j *api.Job) { j.Meta["themis.lease"] = "0c2f" },
			[]string{`meta "themis.lease"`}},
		{"themis.suspended that the planner never wrote", func(j *api.Job) {
			j.TaskGroups[0].Count, j.Meta["themis.suspended"], j.Meta["themis.count"] = ptr(0), "0c2f", "1"
		}, []string{`meta "themis.suspended"`}},
		{"themis.restart_count in task meta", func(j *api.Job) { themisTask(j).Meta = map[string]string{"themis.restart_count": "7"} },
			[]string{`group "g" task "t"`, `meta "themis.restart_count"`}},
		{"themis.lease_id in group meta", func(j *api.Job) { j.TaskGroups[0].Meta = map[string]string{"themis.lease_id": "0c2f"} },
			[]string{`group "g"`, `meta "themis.lease_id"`}},
		{"themis.lease (the old spelling) in group meta", func(j *api.Job) { j.TaskGroups[0].Meta = map[string]string{"themis.lease": "0c2f"} },
			[]string{`group "g"`, `meta "themis.lease"`}},
		{"themis.lease (the old spelling) in task meta", func(j *api.Job) { themisTask(j).Meta = map[string]string{"themis.lease": "0c2f"} },
			[]string{`group "g" task "t"`, `meta "themis.lease"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, stack.Of(policies.FIFO{}))
			h.Nomad.Submit("hostile", 1, "be", "10s")
			tc.shape(h.Nomad.Submitted("hostile"))
			h.Nomad.Submit("good", 1, "be", "10s")
			h.Round("first")
			h.Round("second")
			hostile, good := core.JobKey{Namespace: "default", ID: "hostile"}, core.JobKey{Namespace: "default", ID: "good"}
			st := h.Store.JobStatuses[hostile]
			if l, ok := h.Store.JobLeases[hostile]; ok {
				t.Errorf("the hostile job was granted %v (status %s)", l.GPUs, st.State)
			}
			if st.State != "rejected" {
				t.Errorf("status %s (%s), want rejected", st.State, st.Reason)
			}
			for _, n := range tc.names {
				if !strings.Contains(st.Reason, n) {
					t.Errorf("the rejection does not name %s: %s", n, st.Reason)
				}
			}
			if _, ok := h.Store.JobLeases[good]; !ok {
				t.Errorf("the good job was not granted: %+v", h.Store.JobStatuses[good])
			}
		})
	}
}

var _ = nomad.LeaseMeta
