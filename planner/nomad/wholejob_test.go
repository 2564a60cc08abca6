package nomad

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
)

func dev(name string, n uint64) *api.RequestedDevice {
	return &api.RequestedDevice{Name: name, Count: &n}
}

func withDevices(t *api.Task, ds ...*api.RequestedDevice) *api.Task {
	t.Resources = &api.Resources{Devices: ds}
	return t
}

// The whole-job check: a device request anywhere but the themis task's
// themis GPU request, a periodic or parameterized job, or planner-only
// meta in a group or task is rejected, naming group, task and block; the
// pin's own output passes.
func TestCheckWhole(t *testing.T) {
	ok := []any{map[string]any{"gpus": 2.0}}
	raw := func(name string, ds ...*api.RequestedDevice) *api.Task {
		return withDevices(&api.Task{Name: name, Driver: "raw_exec"}, ds...)
	}
	group := func(name string, ts ...*api.Task) *api.TaskGroup {
		return &api.TaskGroup{Name: ptr(name), Count: ptr(1), Tasks: ts}
	}
	cases := []struct {
		name string
		job  *api.Job
		want string // "" = accepted
	}{
		{"plain", jobWith(group("g", themisTask("t", ok))), ""},
		{"its own themis GPU request", jobWith(group("g", withDevices(themisTask("t", ok), dev("themis/gpu", 2)))), ""},
		{"its own themis GPU request with a model", jobWith(group("g", withDevices(themisTask("t", ok), dev("themis/gpu/sim", 2)))), ""},
		{"a sidecar without devices", jobWith(group("g", themisTask("t", ok), raw("log"))), ""},
		{"device gpu in the themis task", jobWith(group("g", withDevices(themisTask("t", ok), dev("gpu", 1)))),
			`job "j" group "g" task "t": device "gpu": the themis task gets its GPUs from its lease`},
		{"device nvidia/gpu besides its own", jobWith(group("g", withDevices(themisTask("t", ok), dev("themis/gpu", 2), dev("nvidia/gpu", 1)))),
			`job "j" group "g" task "t": device "nvidia/gpu"`},
		{"a second group's themis GPUs", jobWith(group("g", themisTask("t", ok)), group("side", raw("grab", dev("themis/gpu", 4)))),
			`job "j" group "side" task "grab": device "themis/gpu": a themis job gets devices only through the lease of its themis task (group "g" task "t")`},
		{"a sidecar's GPU", jobWith(group("g", themisTask("t", ok), raw("side", dev("amd/gpu", 1)))),
			`job "j" group "g" task "side": device "amd/gpu"`},
		{"another kind of device", jobWith(group("g", themisTask("t", ok)), group("side", raw("x", dev("xilinx/fpga", 1)))),
			`group "side" task "x": device "xilinx/fpga"`},
		{"planner meta in a task", jobWith(group("g", &api.Task{Name: "t", Driver: DriverName, Config: map[string]any{"themis": ok},
			Meta: map[string]string{RestartCountMeta: "9"}})), `job "j" group "g" task "t": meta "themis.restart_count"`},
		{"planner meta in a group", func() *api.Job {
			g := group("g", themisTask("t", ok))
			g.Meta = map[string]string{LeaseMeta: "L"}
			return jobWith(g)
		}(), `job "j" group "g": meta "themis.lease_id"`},
		{"planner meta in a group, the old lease key", func() *api.Job {
			g := group("g", themisTask("t", ok))
			g.Meta = map[string]string{OldLeaseMeta: "L"}
			return jobWith(g)
		}(), `job "j" group "g": meta "themis.lease"`},
		{"planner meta in a task, the old lease key", jobWith(group("g", &api.Task{Name: "t", Driver: DriverName, Config: map[string]any{"themis": ok},
			Meta: map[string]string{OldLeaseMeta: "L"}})), `job "j" group "g" task "t": meta "themis.lease"`},
		{"planner meta in another group's task", jobWith(group("g", themisTask("t", ok)), group("o", &api.Task{Name: "x", Driver: "raw_exec",
			Meta: map[string]string{SuspendedMeta: "L"}})), `job "j" group "o" task "x": meta "themis.suspended"`},
		{"periodic", func() *api.Job {
			j := jobWith(group("g", themisTask("t", ok)))
			j.Periodic = &api.PeriodicConfig{Spec: ptr("@daily")}
			return j
		}(), `job "j": periodic block`},
		{"parameterized", func() *api.Job {
			j := jobWith(group("g", themisTask("t", ok)))
			j.ParameterizedJob = &api.ParameterizedJobConfig{}
			return j
		}(), `job "j": parameterized block`},
		{"a dispatched child runs once", func() *api.Job {
			j := jobWith(group("g", themisTask("t", ok)))
			j.ParameterizedJob, j.Dispatched = &api.ParameterizedJobConfig{}, true
			return j
		}(), ""},
		{"nil groups, tasks and devices", jobWith(nil, group("g", nil, withDevices(themisTask("t", ok), nil))), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parsedAs(t, tc.job, tc.want)
		})
	}
}

// A version of a job that the planner did not register carries none of
// the job-level meta its pin and suspension write (the planner's records
// say which versions are its own; planner/own.go).
func TestCheckPlannerMeta(t *testing.T) {
	cases := []struct {
		name string
		meta map[string]string
		want string
	}{
		{"none", nil, ""},
		{"a restart count (the pin overwrites it)", map[string]string{RestartCountMeta: "3"}, ""},
		{"other meta", map[string]string{"owner": "team-a"}, ""},
		{"a pin's lease", map[string]string{LeaseMeta: "L1"}, `meta "themis.lease_id" = "L1"`},
		{"a pin's lease, as planners before #34 wrote it", map[string]string{OldLeaseMeta: "L1"}, `meta "themis.lease" = "L1"`},
		{"the old lease key, empty", map[string]string{OldLeaseMeta: ""}, `meta "themis.lease" = ""`},
		{"both lease keys", map[string]string{LeaseMeta: "L1", OldLeaseMeta: "L0"}, `meta "themis.lease_id" = "L1"`},
		{"a pin's gang", map[string]string{GangMeta: "3"}, `meta "themis.gang" = "3"`},
		{"a suspension copied", map[string]string{SuspendedMeta: "L1", CountMeta: "1", RestartCountMeta: "0"}, `meta "themis.suspended" = "L1"`},
		{"suspended, empty", map[string]string{SuspendedMeta: ""}, `meta "themis.suspended" = ""`},
		{"a count without a suspension", map[string]string{CountMeta: "1"}, `meta "themis.count" = "1"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{Job: &api.Job{Meta: tc.meta}}
			j.Key.ID = "j"
			err := CheckPlannerMeta(j)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "only the planner writes it")):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// The pin rewrites every device request of the job: even on a job the
// whole-job check would have refused, what it registers asks for exactly
// the leased GPUs in the themis task and for no device anywhere else.
func TestPinRewritesEveryDeviceRequest(t *testing.T) {
	ok := []any{map[string]any{"gpus": 2.0}}
	clean := jobWith(&api.TaskGroup{Name: ptr("g"), Count: ptr(1), Tasks: []*api.Task{themisTask("t", ok)}})
	j, err := ParseJob(clean)
	if err != nil || j.Err != nil {
		t.Fatal(err, j.Err)
	}
	// What Nomad holds at pin time, had the check missed it.
	job := jobWith(
		&api.TaskGroup{Name: ptr("g"), Count: ptr(3), Tasks: []*api.Task{
			withDevices(themisTask("t", ok), dev("themis/gpu", 8), dev("gpu", 2), dev("nvidia/gpu", 1)),
			withDevices(&api.Task{Name: "side", Driver: "raw_exec"}, dev("themis/gpu", 4))}},
		&api.TaskGroup{Name: ptr("other"), Tasks: []*api.Task{withDevices(&api.Task{Name: "grab", Driver: "raw_exec"}, dev("amd/gpu", 1))}})
	job.Meta = map[string]string{SuspendedMeta: "L0", CountMeta: "8"}
	l := lease.JobLease{LeaseID: "L1", Namespace: "default", JobID: "j", NodeID: "n1", NodeName: "node-1", GPUs: []string{"g0", "g1"}, GrantedAt: time.Now()}
	c := &Client{foreign: DefaultForeignCheckpoints()}
	if err := rewrite(job, j, "pin", c.pinChange(j, l, "gpu-pool", 0)); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, tg := range job.TaskGroups {
		for _, task := range tg.Tasks {
			if task.Resources == nil {
				continue
			}
			for _, d := range task.Resources.Devices {
				b, _ := json.Marshal(d)
				all = append(all, deref(tg.Name)+"/"+task.Name+": "+string(b))
			}
		}
	}
	want := `g/t: {"Name":"themis/gpu","Count":2,"Constraints":[{"LTarget":"${device.ids}","RTarget":"g0,g1","Operand":"set_contains_any"}],"Affinities":null}`
	if len(all) != 1 || all[0] != want {
		t.Fatalf("device requests after the pin:\n%s\nwant only\n%s", strings.Join(all, "\n"), want)
	}
	if n := deref(job.TaskGroups[0].Count); n != 1 {
		t.Errorf("the pinned group's count is %d, want 1 (one allocation on the leased node)", n)
	}
}

// parsedAs parses job and fails the test unless it is accepted (want "")
// or rejected with an error that contains want; it returns the parsed job.
// Errors are quoted up to 300 bytes (a rejected name may be 400 KB).
func parsedAs(t *testing.T, job *api.Job, want string) *Job {
	t.Helper()
	j, err := ParseJob(job)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case want == "" && j.Err != nil:
		t.Fatalf("rejected: %.300v", j.Err)
	case want != "" && (j.Err == nil || !strings.Contains(j.Err.Error(), want)):
		t.Fatalf("Err = %.300v, want %q", j.Err, want)
	}
	return j
}
