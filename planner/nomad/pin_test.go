package nomad

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomadread"
)

// userJob is a themis job as its user might submit it: meta, constraints,
// affinities, spreads, a device request of its own and a second task with
// one, all of which a pin must carry over or drop as before.
func userJob(id string, index uint64) *api.Job {
	cfg := map[string]any{"command": "train", "args": []any{"--epochs", 3.0}, "themis": []any{map[string]any{"gpus": 2.0, "vc": "a"}}}
	n := uint64(1)
	return &api.Job{
		ID: ptr(id), Name: ptr(id), Namespace: ptr("default"), Type: ptr("batch"), Status: ptr("pending"),
		NodePool: ptr(DefaultPendingPool), Priority: ptr(50), Datacenters: []string{"dc1"},
		ModifyIndex: ptr(index), JobModifyIndex: ptr(index), CreateIndex: ptr(index), Version: ptr(uint64(0)),
		Meta:        map[string]string{"owner": "alice", "team": "vision"},
		Constraints: []*api.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}},
		Affinities:  []*api.Affinity{{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Weight: ptr(int8(50))}},
		Spreads:     []*api.Spread{{Attribute: "${node.datacenter}", Weight: ptr(int8(30)), SpreadTarget: []*api.SpreadTarget{{Value: "dc1", Percent: 100}}}},
		TaskGroups: []*api.TaskGroup{{
			Name: ptr("g"), Count: ptr(1),
			Meta:        map[string]string{"group": "yes"},
			Constraints: []*api.Constraint{{LTarget: "${node.unique.id}", Operand: "=", RTarget: "old-node"}, {Operand: api.ConstraintDistinctHosts, RTarget: "true"}, {LTarget: "${attr.cpu.arch}", Operand: "=", RTarget: "amd64"}},
			Tasks: []*api.Task{
				{Name: "t", Driver: DriverName, Config: cfg, Env: map[string]string{"A": "1"}, Meta: map[string]string{"task": "yes"},
					Resources: &api.Resources{CPU: ptr(500), MemoryMB: ptr(256), Devices: []*api.RequestedDevice{
						{Name: "nvidia/gpu", Count: &n}, {Name: "themis/gpu", Count: &n},
					}}},
				{Name: "side", Driver: "exec", Config: map[string]any{"command": "true"},
					Resources: &api.Resources{Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: &n}}}},
			},
		}},
	}
}

// pinSetup is a fake Nomad with userJob "a" and a client whose snapshot
// read it; requests and registrations are counted from here on.
func pinSetup(t *testing.T) (*fakeNomad, *Client, *Job) {
	t.Helper()
	f := newFakeNomad()
	f.node("n1", 8)
	f.index++
	f.jobs["a"] = userJob("a", f.index)
	f.jobsIdx = f.index
	c := fakeClient(t, f)
	s, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs) != 1 {
		t.Fatalf("snapshot has %d jobs, want 1", len(s.Jobs))
	}
	f.mu.Lock()
	f.requests, f.registered = nil, nil
	f.mu.Unlock()
	return f, c, s.Jobs[0]
}

func pinLease() lease.JobLease {
	return lease.JobLease{LeaseID: "L1", Namespace: "default", JobID: "a", NodeID: "n1", NodeName: "n1", GPUs: []string{"n1-0", "n1-1"}}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Pin registers, in its one Nomad request, the job it registered when it
// read the job again first (the read then the rewrite, as before), and
// leaves the snapshot's job as it was.
func TestPinRegistersTheSnapshotsJobOnce(t *testing.T) {
	ctx := context.Background()
	f, c, j := pinSetup(t)
	l := pinLease()

	// What the pin wrote before: the job read again, changed the same way.
	old, err := nomadread.Job(ctx, c.api, "default", "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := rewrite(old, j, "pin", c.pinChange(j, l, "gpu", 2)); err != nil {
		t.Fatal(err)
	}
	cached := jsonOf(t, j.Job)
	f.mu.Lock()
	f.requests = nil
	f.mu.Unlock()

	if err := c.Pin(ctx, j, l, "gpu", 2); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	requests, registered := f.requests, f.registered
	f.mu.Unlock()
	// It made two before: GET /v1/job/a, then the register.
	if want := []string{"PUT /v1/jobs"}; !slices.Equal(requests, want) {
		t.Fatalf("pin made requests %q, want %q", requests, want)
	}
	if len(registered) != 1 {
		t.Fatalf("%d jobs registered, want 1", len(registered))
	}
	got := registered[0]
	if jsonOf(t, got) != jsonOf(t, old) {
		t.Errorf("pin registered\n%s\nbefore it registered\n%s", jsonOf(t, got), jsonOf(t, old))
	}
	// What a pin writes, spelled out.
	if deref(got.NodePool) != "gpu" || got.Meta["owner"] != "alice" || got.Meta["team"] != "vision" || got.Meta[RestartCountMeta] != "2" {
		t.Errorf("pinned job's pool %q meta %v", deref(got.NodePool), got.Meta)
	}
	tg := got.TaskGroups[0]
	var cons []string
	for _, c := range tg.Constraints {
		cons = append(cons, c.LTarget+" "+c.Operand+" "+c.RTarget)
	}
	if want := []string{"${attr.cpu.arch} = amd64", "${node.unique.id} = n1"}; !slices.Equal(cons, want) {
		t.Errorf("pinned group's constraints %q, want %q", cons, want)
	}
	if deref(tg.Count) != 1 {
		t.Errorf("pinned group's count %d, want 1", deref(tg.Count))
	}
	devs := tg.Tasks[0].Resources.Devices
	if len(devs) != 1 || devs[0].Name != "themis/gpu" || deref(devs[0].Count) != 2 || len(devs[0].Constraints) != 1 ||
		devs[0].Constraints[0].RTarget != "n1-0,n1-1" || devs[0].Constraints[0].Operand != "set_contains_any" {
		t.Errorf("pinned task's devices %s", jsonOf(t, devs))
	}
	if tg.Tasks[1].Resources.Devices != nil {
		t.Errorf("the other task kept its devices %s", jsonOf(t, tg.Tasks[1].Resources.Devices))
	}
	if jsonOf(t, j.Job) != cached {
		t.Errorf("pin changed the snapshot's job:\n%s\nwas\n%s", jsonOf(t, j.Job), cached)
	}
}

// Pin, Suspend (one themis task: edit; several: editAll) and Adopt never
// change the job the snapshot keeps across rounds.
func TestEditsLeaveTheCachedJob(t *testing.T) {
	ctx := context.Background()
	f, c, j := pinSetup(t)
	before := copyOf(t, j.Job)
	if err := c.Pin(ctx, j, pinLease(), "gpu", 0); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j.Job, before) {
		t.Fatalf("Pin changed the cached job:\n%s\nwas\n%s", jsonOf(t, j.Job), jsonOf(t, before))
	}
	// The next round reads the pinned job; suspending it leaves that one.
	s, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j = s.Jobs[0]
	before = copyOf(t, j.Job)
	if err := c.Suspend(ctx, j, "L1"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j.Job, before) {
		t.Fatalf("Suspend changed the cached job:\n%s\nwas\n%s", jsonOf(t, j.Job), jsonOf(t, before))
	}
	f.mu.Lock()
	got := f.registered[len(f.registered)-1]
	f.mu.Unlock()
	if deref(got.TaskGroups[0].Count) != 0 || got.Meta[SuspendedMeta] != "L1" || deref(got.NodePool) != DefaultPendingPool {
		t.Errorf("suspended job's count %d meta %v pool %q", deref(got.TaskGroups[0].Count), got.Meta, deref(got.NodePool))
	}

	// Two themis tasks: Suspend goes through editAll.
	s, err = c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j = s.Jobs[0]
	f.mu.Lock()
	two := userJob("a", 0)
	two.TaskGroups[0].Tasks[1].Driver = DriverName
	f.index++
	two.ModifyIndex, two.JobModifyIndex = ptr(f.index), ptr(f.index)
	f.jobs["a"] = two
	f.jobsIdx = f.index
	f.mu.Unlock()
	if s, err = c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	j = s.Jobs[0]
	if j.Task != "" {
		t.Fatalf("a job with two themis tasks parsed with task %q", j.Task)
	}
	before = copyOf(t, j.Job)
	if err := c.Suspend(ctx, j, "L2"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j.Job, before) {
		t.Fatalf("Suspend (editAll) changed the cached job:\n%s\nwas\n%s", jsonOf(t, j.Job), jsonOf(t, before))
	}
	f.mu.Lock()
	got = f.registered[len(f.registered)-1]
	f.mu.Unlock()
	if got.Meta[SuspendedMeta] != "L2" || got.TaskGroups[0].Tasks[0].Resources.Devices != nil {
		t.Errorf("editAll's job: meta %v devices %s", got.Meta, jsonOf(t, got.TaskGroups[0].Tasks[0].Resources.Devices))
	}

	// Adopt, of the job as the next round reads it.
	if s, err = c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	j = s.Jobs[0]
	j.Job.NodePool = ptr("default") // as if submitted outside the pending pool
	before = copyOf(t, j.Job)
	if err := c.Adopt(ctx, j); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j.Job, before) {
		t.Fatalf("Adopt changed the cached job:\n%s\nwas\n%s", jsonOf(t, j.Job), jsonOf(t, before))
	}
	f.mu.Lock()
	got = f.registered[len(f.registered)-1]
	f.mu.Unlock()
	if deref(got.NodePool) != DefaultPendingPool {
		t.Errorf("adopted job's pool %q", deref(got.NodePool))
	}
}

// copyOf is an independent deep copy, for comparing against (not copyJob,
// which is under test).
func copyOf(t *testing.T, job *api.Job) *api.Job {
	t.Helper()
	var out api.Job
	if err := json.Unmarshal([]byte(jsonOf(t, job)), &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&out, job) {
		t.Fatalf("the test's copy differs from the job:\n%s", jsonOf(t, job))
	}
	return &out
}

// A job changed, stopped or purged in Nomad between the snapshot and the
// pin is refused with ErrJobChanged, by the register's check-and-set alone,
// and nothing is registered.
func TestPinRefusesAJobChangedSinceTheSnapshot(t *testing.T) {
	cases := []struct {
		name   string
		change func(f *fakeNomad)
	}{
		{"resubmitted", func(f *fakeNomad) {
			f.index++
			j := userJob("a", f.index)
			j.Meta["owner"] = "bob"
			f.jobs["a"] = j
		}},
		// nomad job stop: Nomad upserts the job with Stop set, at a new
		// JobModifyIndex (nomad/fsm.go, handleJobDeregister).
		{"stopped", func(f *fakeNomad) {
			f.index++
			j := *f.jobs["a"]
			j.Stop, j.Status = ptr(true), ptr("dead")
			j.ModifyIndex, j.JobModifyIndex = ptr(f.index), ptr(f.index)
			f.jobs["a"] = &j
		}},
		// nomad job stop -purge: "job does not exist".
		{"purged", func(f *fakeNomad) { delete(f.jobs, "a") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f, c, j := pinSetup(t)
			f.mu.Lock()
			tc.change(f)
			f.jobsIdx = f.index
			inNomad := jsonOf(t, f.jobs["a"])
			f.mu.Unlock()
			for _, edit := range []struct {
				name string
				do   func() error
			}{
				{"pin", func() error { return c.Pin(ctx, j, pinLease(), "gpu", 0) }},
				{"suspend", func() error { return c.Suspend(ctx, j, "L1") }},
				{"adopt", func() error { return c.Adopt(ctx, j) }},
			} {
				err := edit.do()
				if !errors.Is(err, ErrJobChanged) {
					t.Errorf("%s: %v, want ErrJobChanged", edit.name, err)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.registered) != 0 {
				t.Errorf("%d jobs registered, want none", len(f.registered))
			}
			if got := jsonOf(t, f.jobs["a"]); got != inNomad {
				t.Errorf("the job in Nomad became\n%s\nwas\n%s", got, inNomad)
			}
			for _, r := range f.requests {
				if r != "PUT /v1/jobs" {
					t.Errorf("request %q: an edit makes only the register", r)
				}
			}
		})
	}
}

// A job the planner holds without a JobModifyIndex (never one Nomad
// returns) is refused before any request: the check-and-set on index 0
// could only refuse it.
func TestPinWithoutModifyIndex(t *testing.T) {
	f, c, j := pinSetup(t)
	j.Job.JobModifyIndex = nil
	if err := c.Pin(context.Background(), j, pinLease(), "gpu", 0); !errors.Is(err, ErrJobChanged) {
		t.Errorf("pin: %v, want ErrJobChanged", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) != 0 {
		t.Errorf("requests %q, want none", f.requests)
	}
}

// copyJob loses nothing of a job: a representative one compares equal, and
// so does one with every field of the api.Job tree set (a field JSON
// dropped, or changed on the way back, would differ).
func TestCopyJob(t *testing.T) {
	rep := userJob("a", 7)
	rep.Periodic, rep.ParameterizedJob = nil, nil
	full := new(api.Job)
	fillAll(reflect.ValueOf(full).Elem(), 0)
	for name, job := range map[string]*api.Job{"representative": rep, "every field set": full} {
		got, err := copyJob(job)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, job) {
			t.Errorf("%s: copy\n%s\ndiffers from\n%s", name, jsonOf(t, got), jsonOf(t, job))
		}
		// Deep: changing the copy leaves the job.
		was := jsonOf(t, job)
		got.Meta["x"] = "changed"
		got.TaskGroups[0].Constraints[0].RTarget = "changed"
		got.TaskGroups[0].Tasks[0].Resources.Devices[0].Name = "changed"
		got.TaskGroups[0].Tasks[0].Config["changed"] = true
		if jsonOf(t, job) != was {
			t.Errorf("%s: changing the copy changed the job", name)
		}
	}
}

// fillAll sets every exported field reachable from v (but those JSON never
// carries, json:"-") to a value that is not the zero one, down to a depth.
func fillAll(v reflect.Value, depth int) {
	if depth > 20 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(1700000000, 0).UTC()))
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || strings.Split(f.Tag.Get("json"), ",")[0] == "-" {
				continue
			}
			fillAll(v.Field(i), depth+1)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillAll(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fillAll(k, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fillAll(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		if v.Type().NumMethod() == 0 {
			v.Set(reflect.ValueOf(map[string]any{"k": []any{"v", 2.5, true}}))
		}
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(3)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}

// The pin bounds the job's Nomad priority (PinPriority, whatever the user
// wrote), so that no pinned job outranks another by the ten priority
// points Nomad's preemption needs, and blinds every task but the themis
// one to GPUs through the container runtime (NVIDIA_VISIBLE_DEVICES=void):
// a sidecar gets no GPU by an image's own ENV.
func TestPinBoundsNomadPriorityAndBlindsSidecars(t *testing.T) {
	ctx := context.Background()
	f := newFakeNomad()
	f.node("n1", 8)
	f.index++
	job := userJob("a", f.index)
	job.Priority = ptr(100)
	job.TaskGroups[0].Tasks[1].Resources.Devices = nil
	job.TaskGroups[0].Tasks[0].Resources.Devices = nil
	job.TaskGroups[0].Tasks[1].Env = map[string]string{"B": "2"}
	f.jobs["a"] = job
	f.jobsIdx = f.index
	c := fakeClient(t, f)
	s, err := c.Snapshot(ctx)
	if err != nil || len(s.Jobs) != 1 || s.Jobs[0].Err != nil {
		t.Fatalf("snapshot: %v %+v", err, s)
	}
	if err := c.Pin(ctx, s.Jobs[0], pinLease(), "gpu", 0); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := f.registered[len(f.registered)-1]
	f.mu.Unlock()
	if p := deref(got.Priority); p != PinPriority {
		t.Errorf("pinned job's Nomad priority %d, want %d (the user wrote 100)", p, PinPriority)
	}
	side := got.TaskGroups[0].Tasks[1]
	if side.Env["NVIDIA_VISIBLE_DEVICES"] != "void" || side.Env["B"] != "2" {
		t.Errorf("sidecar env %v, want NVIDIA_VISIBLE_DEVICES=void and its own B=2", side.Env)
	}
	if _, ok := got.TaskGroups[0].Tasks[0].Env["NVIDIA_VISIBLE_DEVICES"]; ok {
		t.Errorf("themis task env %v: its GPUs come from the device plugin", got.TaskGroups[0].Tasks[0].Env)
	}
}
