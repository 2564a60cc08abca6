package nomad

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/device/topology"
	"github.com/themis-nomad/themis/planner/lease"
)

func ptr[T any](v T) *T { return &v }

func themisTask(name string, stanza any) *api.Task {
	cfg := map[string]any{"command": "train"}
	if stanza != nil {
		cfg["themis"] = stanza
	}
	return &api.Task{Name: name, Driver: DriverName, Config: cfg}
}

func jobWith(groups ...*api.TaskGroup) *api.Job {
	return &api.Job{ID: ptr("j"), Namespace: ptr("default"), TaskGroups: groups}
}

func TestParseJob(t *testing.T) {
	ok := []any{map[string]any{"gpus": 2.0}}
	cases := []struct {
		name    string
		job     *api.Job
		notOurs bool
		wantErr string
		gpus    int
	}{
		{"plain job", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{{Name: "t", Driver: "raw_exec"}}}), true, "", 0},
		{"valid", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{themisTask("t", ok)}}), false, "", 2},
		{"sidecar is fine", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{themisTask("t", ok), {Name: "log", Driver: "raw_exec"}}}), false, "", 2},
		{"no stanza", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{themisTask("t", nil)}}), false,
			`job "j" group "g" task "t": uses driver "themis" but its config has no "themis" block`, 0},
		{"bad stanza names field", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{themisTask("t", []any{map[string]any{"gpus": "two"}})}}), false,
			`job "j" group "g" task "t": themis.gpus: must be a whole number, got "two"`, 0},
		{"raw_exec with the stanza in task meta", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{
			{Name: "t", Driver: "raw_exec", User: "nobody", Meta: map[string]string{"themis.gpus": "4", "themis.class": "te"}}}}), false, "", 4},
		{"raw_exec as the client's user (root)", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{
			{Name: "t", Driver: "raw_exec", Meta: map[string]string{"themis.gpus": "4"}}}}), false,
			`job "j" group "g" task "t" (driver "raw_exec", stanza in meta): user: a raw_exec themis task names no user, so it would run as the Nomad client's user (root)`, 0},
		{"raw_exec as root", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{
			{Name: "t", Driver: "raw_exec", User: "root", Meta: map[string]string{"themis.gpus": "4"}}}}), false,
			`user: a raw_exec themis task runs as "root"; raw_exec has no filesystem isolation`, 0},
		{"docker with the stanza in group meta", jobWith(&api.TaskGroup{Name: ptr("g"), Meta: map[string]string{"themis.gpus": "3"},
			Tasks: []*api.Task{{Name: "t", Driver: "docker"}}}), false, "", 3},
		{"task meta overrides group meta", jobWith(&api.TaskGroup{Name: ptr("g"), Meta: map[string]string{"themis.gpus": "3"},
			Tasks: []*api.Task{{Name: "t", Driver: "exec", Meta: map[string]string{"themis.gpus": "1"}}}}), false, "", 1},
		{"meta stanza names the field", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{
			{Name: "t", Driver: "exec", Meta: map[string]string{"themis.gpus": "two"}}}}), false,
			`job "j" group "g" task "t" (driver "exec", stanza in meta): themis.gpus: must be a whole number, got "two"`, 0},
		{"meta stanza, unknown field", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{
			{Name: "t", Driver: "exec", Meta: map[string]string{"themis.gpus": "1", "themis.grace": "10s"}}}}), false,
			`themis.grace: unknown field`, 0},
		{"meta stanza without gpus", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{
			{Name: "t", Driver: "exec", Meta: map[string]string{"themis.vc": "a"}}}}), false,
			`themis.gpus: is required`, 0},
		{"another namespace's meta is not a stanza", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{
			{Name: "t", Driver: "exec", Meta: map[string]string{"themisx.gpus": "1", "owner": "x"}}}}), true, "", 0},
		{"a dot-segment ID", func() *api.Job {
			j := jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{themisTask("t", ok)}})
			j.ID = ptr("..")
			return j
		}(), false, `job ".." group "g" task "t": the job ID ".." is a dot segment`, 0},
		{"an escaped ID with ..", func() *api.Job {
			j := jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{themisTask("t", ok)}})
			j.ID = ptr("sweep/lr1..2")
			return j
		}(), false, `the job ID "sweep/lr1..2" holds ".."`, 0},
		{"a dot-segment task name", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{themisTask(".", ok)}}), false,
			`the task name "." is a dot segment`, 0},
		{"two themis tasks", jobWith(&api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{themisTask("a", ok), themisTask("b", ok)}}), false,
			"2 tasks are themis tasks", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJob(tc.job)
			if tc.notOurs {
				if !errors.Is(err, ErrNotThemis) {
					t.Fatalf("err = %v, want ErrNotThemis", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" {
				if j.Err == nil || !strings.Contains(j.Err.Error(), tc.wantErr) {
					t.Fatalf("Err = %v, want %q", j.Err, tc.wantErr)
				}
				return
			}
			if j.Err != nil {
				t.Fatal(j.Err)
			}
			if j.Intent.GPUs != tc.gpus || j.Group != "g" || j.Task != "t" {
				t.Fatalf("%+v", j)
			}
		})
	}
}

func TestNodeFromNomad(t *testing.T) {
	layout := topology.EncodeLayout([]topology.GPU{
		{Index: 0, ID: "g0", Path: "socket0/pair0"}, {Index: 1, ID: "g1", Path: "socket0/pair0"},
	})
	stub := func(layout string) *api.NodeListStub {
		return &api.NodeListStub{ID: "n1", Name: "node1", Status: "ready", SchedulingEligibility: "eligible",
			NodeResources: &api.NodeResources{Devices: []*api.NodeDeviceResource{
				{Vendor: "nvidia", Type: "gpu", Name: "other", Instances: []*api.NodeDevice{{ID: "x", Healthy: true}}},
				{Vendor: topology.Vendor, Type: topology.DeviceType, Name: "A100",
					Instances: []*api.NodeDevice{{ID: "g1", Healthy: false}, {ID: "g0", Healthy: true}},
					Attributes: map[string]*api.Attribute{
						topology.AttrLayout: {StringVal: ptr(layout)},
						topology.AttrRack:   {StringVal: ptr("r7")},
					}},
			}}}
	}
	n, ok, err := NodeFromNomad(stub(layout))
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	if !n.Schedulable || n.Rack != "r7" || len(n.GPUs) != 2 {
		t.Fatalf("%+v", n)
	}
	if n.GPUs[0].ID != "g0" || !n.GPUs[0].Healthy || n.GPUs[1].Healthy || strings.Join(n.GPUs[1].Path, "/") != "socket0/pair0" {
		t.Fatalf("GPUs %+v", n.GPUs)
	}

	if _, _, err := NodeFromNomad(stub("0:g0:socket0")); err == nil || !strings.Contains(err.Error(), `GPU "g1" is missing`) {
		t.Fatalf("missing GPU in layout: err = %v", err)
	}
	if _, _, err := NodeFromNomad(stub("garbage")); err == nil || !strings.Contains(err.Error(), `attribute "layout"`) {
		t.Fatalf("bad layout: err = %v", err)
	}
	plain := &api.NodeListStub{ID: "n2", Status: "ready"}
	if _, ok, err := NodeFromNomad(plain); ok || err != nil {
		t.Fatalf("node without resources: ok=%v err=%v", ok, err)
	}
	drained := stub(layout)
	drained.Drain = true
	if n, _, _ := NodeFromNomad(drained); n.Schedulable {
		t.Fatal("a draining node is schedulable")
	}
	if n.GangAddr != "" {
		t.Fatalf("gang address %q of a node whose driver published none", n.GangAddr)
	}
	withAddr := stub(layout)
	withAddr.Drivers = map[string]*api.DriverInfo{"themis": {Attributes: map[string]string{lease.AttrGangAddress: "10.1.2.3"}}}
	if n, _, _ := NodeFromNomad(withAddr); n.GangAddr != "10.1.2.3" {
		t.Fatalf("gang address %q, want the themis driver's attribute 10.1.2.3", n.GangAddr)
	}
}
