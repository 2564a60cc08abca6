package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
)

// The follower prints each step once and ends on the first that settles
// the run: running (0), rejected, failed or lost (1). What the planner
// says of an older version of the job, and allocations of one, are not
// taken for this submission's.
func TestFollowerSteps(t *testing.T) {
	sub := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	api := func(j httpapi.Job) followEvent { return followEvent{planner: &plannerJob{doc: j}} }
	record := func(state, reason string, since time.Time) followEvent {
		return followEvent{planner: &plannerJob{doc: httpapi.Job{State: state, Reason: reason, Since: since}, fromConsul: true}}
	}
	granted := func(index uint64, parts int) httpapi.Job {
		l := &httpapi.Lease{Job: "default/a", State: "granted"}
		l.LeaseID, l.NodeName, l.GPUs, l.SubmitIndex = "L1", "dev-node", []string{"g0", "g1"}, index
		for range parts {
			l.Parts = append(l.Parts, lease.Part{NodeName: "n"})
		}
		return httpapi.Job{State: "granted", ModifyIndex: index + 1, Lease: l}
	}
	alloc := func(create uint64, status, task string) *nomadapi.AllocationListStub {
		a := &nomadapi.AllocationListStub{ID: "abcdef0123456789", CreateIndex: create, ClientStatus: status, NodeName: "dev-node",
			TaskStates: map[string]*nomadapi.TaskState{}}
		if task != "" {
			a.TaskStates["hello"] = &nomadapi.TaskState{State: task}
		}
		return a
	}
	allocs := func(as ...*nomadapi.AllocationListStub) followEvent { return followEvent{allocs: as} }
	for _, tc := range []struct {
		name   string
		events []followEvent
		code   int // -1: not done
		lines  []string
	}{
		{"queued, granted, running", []followEvent{
			api(httpapi.Job{State: "finished", ModifyIndex: 5}), // the previous run's word
			api(httpapi.Job{State: "queued", ModifyIndex: 10, Reason: "waiting for 2 free GPUs (0 free)", Queue: &httpapi.Queued{Position: 3}}),
			api(httpapi.Job{State: "queued", ModifyIndex: 10, Reason: "waiting for 2 free GPUs (0 free)", Queue: &httpapi.Queued{Position: 3}}),
			allocs(alloc(4, "running", "running")), // an older version's allocation
			api(granted(10, 0)),
			allocs(alloc(12, "pending", "")),
			allocs(alloc(12, "running", "running")),
		}, 0, []string{"queued: position 3 in its queue: waiting for 2 free GPUs (0 free)",
			"granted: 2 GPUs on dev-node (g0,g1), lease L1", "running: allocation abcdef01 on dev-node"}},
		{"rejected by the planner", []followEvent{api(httpapi.Job{State: "rejected", ModifyIndex: 10, Reason: `themis.vc: "nope" is not a virtual cluster`})},
			1, []string{`rejected: themis.vc: "nope" is not a virtual cluster`}},
		{"an old rejection is not this submission's", []followEvent{api(httpapi.Job{State: "rejected", ModifyIndex: 9, Reason: "old"})}, -1, nil},
		{"the allocation fails", []followEvent{api(granted(10, 0)), allocs(&nomadapi.AllocationListStub{ID: "f00", CreateIndex: 12, ClientStatus: "failed",
			TaskStates: map[string]*nomadapi.TaskState{"hello": {Events: []*nomadapi.TaskEvent{{Type: nomadapi.TaskDriverFailure, DisplayMessage: "permission denied"}}}}})},
			1, []string{"granted: ", `failed: task "hello": Driver Failure: permission denied`}},
		{"the job failed", []followEvent{api(httpapi.Job{State: "failed", ModifyIndex: 11, Reason: "exit 2"})}, 1, []string{"failed: exit 2"}},
		{"a gang runs when every part runs", []followEvent{api(granted(10, 2)), allocs(alloc(12, "running", "running")),
			allocs(alloc(12, "running", "running"), alloc(13, "running", "running"))}, 0, []string{"granted: ", "running: allocation abcdef01,abcdef01 on dev-node,dev-node"}},
		{"a short job completes before it is seen running", []followEvent{api(granted(10, 0)), allocs(alloc(12, "complete", "dead"))}, 0, []string{"granted: ", "running: "}},
		{"Consul's records: a stale one waits", []followEvent{record("rejected", "old", sub.Add(-time.Hour))}, -1, nil},
		{"Consul's records: a fresh one counts", []followEvent{record("queued", "waiting", sub.Add(time.Second)), record("rejected", "bad stanza", sub.Add(2*time.Second))},
			1, []string{"queued: waiting", "rejected: bad stanza"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			f := &follower{out: &out, job: "default/a", task: "hello", submitIndex: 10, submitted: sub}
			code := -1
			for i, ev := range tc.events {
				if done, c := f.step(ev, sub.Add(time.Second)); done {
					if i != len(tc.events)-1 {
						t.Fatalf("done after event %d of %d:\n%s", i+1, len(tc.events), out.String())
					}
					code = c
				}
			}
			if code != tc.code {
				t.Errorf("code %d, want %d:\n%s", code, tc.code, out.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(tc.lines) == 0 && out.Len() > 0 {
				t.Errorf("printed\n%s\nwant nothing", out.String())
			}
			for i, want := range tc.lines {
				if i >= len(lines) || !strings.Contains(lines[i], want) {
					t.Errorf("line %d: want %q in\n%s", i, want, out.String())
				}
			}
			if len(lines) > len(tc.lines) && len(tc.lines) > 0 {
				t.Errorf("more lines than %d (each step once):\n%s", len(tc.lines), out.String())
			}
		})
	}
}

// The jobspec is read as nomad job run reads it (variables, -var-file,
// NOMAD_VAR_*), and a job the planner would reject is refused before
// anything is submitted, naming the field.
func TestJobRunReadsAndChecksTheJob(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "jobs", "hello.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(dir, "v.hcl")
	if err := os.WriteFile(vars, []byte("steps = 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOMAD_VAR_hello_bin", "/opt/hello")
	file := filepath.Join(dir, "hello.nomad.hcl")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	sub, job, err := readJob(file, jobRunOptions{varFiles: stringList{vars}, strict: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := job.TaskGroups[0].Tasks[0]
	if task.Config["command"] != "/opt/hello" || !strings.Contains(strings.Join(anyStrings(task.Config["args"]), " "), "-steps 7") {
		t.Errorf("config %#v", task.Config)
	}
	if sub.Format != "hcl2" || sub.VariableFlags["hello_bin"] != "/opt/hello" || !strings.Contains(sub.Variables, "steps = 7") || sub.Source != string(src) {
		t.Errorf("submission %+v", sub)
	}
	if got, err := precheck(job); err != nil || got != "hello" {
		t.Errorf("precheck: %q, %v", got, err)
	}

	bad := strings.Replace(string(src), "gpus         = 2", `gpus         = "two"`, 1)
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, job, err = readJob(file, jobRunOptions{strict: true, vars: stringList{"hello_bin=/x"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := precheck(job); err == nil || !strings.Contains(err.Error(), "themis.gpus") || !strings.Contains(err.Error(), "two") {
		t.Errorf("precheck of gpus = \"two\": %v", err)
	}
	if _, _, err := readJob(file, jobRunOptions{strict: true, vars: stringList{"nope=1"}}, nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("an undeclared variable: %v", err)
	}
}

func anyStrings(v any) []string {
	var out []string
	if xs, ok := v.([]any); ok {
		for _, x := range xs {
			out = append(out, fmt.Sprint(x))
		}
	}
	if xs, ok := v.([]string); ok {
		out = xs
	}
	return out
}
