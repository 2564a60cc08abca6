package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
)

// trainJob is a themis job from examples/jobs/hello.nomad.hcl with its
// stanza and command changed.
type trainJob struct {
	gpus  int
	class string // "be" (default) or "te"
	grace string // the stanza's grace_period ("" = the example's)
	vc    string // the stanza's vc ("" = the example's, "default")
	// priority is the stanza's priority; opportunistic jobs say -1.
	priority int
	// steps of 100 ms for hello; ignored when shell is set.
	steps int
	// shell, when set, runs `/bin/sh -c shell` instead of hello.
	shell string
	// app is the stanza's app ("" = the job's own).
	app string
	// iterations is the stanza's iterations (0: unset).
	iterations int
}

func (o trainJob) build(t testing.TB, id string) *nomadapi.Job {
	t.Helper()
	job := helloJob(t, id, max(o.steps, 1), o.gpus)
	task := job.TaskGroups[0].Tasks[0]
	blocks, ok := task.Config["themis"].([]any)
	if !ok || len(blocks) != 1 {
		t.Fatalf("unexpected themis block in the parsed example: %#v", task.Config["themis"])
	}
	stanza := blocks[0].(map[string]any)
	if o.class != "" {
		stanza["class"] = o.class
	}
	if o.grace != "" {
		stanza["grace_period"] = o.grace
	}
	if o.vc != "" {
		stanza["vc"] = o.vc
	}
	if o.priority != 0 {
		stanza["priority"] = o.priority
	}
	if o.app != "" {
		stanza["app"] = o.app
	}
	if o.iterations > 0 {
		stanza["iterations"] = o.iterations
	}
	if o.shell != "" {
		task.Config["command"] = "/bin/sh"
		task.Config["args"] = []any{"-c", o.shell}
	}
	return job
}

// run registers the job (deregistered and purged when the test ends).
func (o trainJob) run(t testing.TB, id string) {
	t.Helper()
	register(t, o.build(t, id))
}

// waitRunning waits until the job holds a lease and its task has started
// and printed at least one hello step (or, for a shell job, started).
func waitRunning(t testing.TB, id string, timeout time.Duration) *nomadapi.AllocationListStub {
	t.Helper()
	var running *nomadapi.AllocationListStub
	eventually(t, timeout, id+" to run", func() (bool, error) {
		if jobLease(t, id) == nil {
			return false, fmt.Errorf("no lease")
		}
		for _, a := range allocs(t, id) {
			if a.ClientStatus != "running" {
				continue
			}
			out, err := readStdout(a.ID)
			if err != nil {
				return false, err
			}
			if stepRE.MatchString(out) || !isHello(a) {
				running = a
				return true, nil
			}
		}
		return false, fmt.Errorf("not running yet")
	})
	return running
}

func isHello(a *nomadapi.AllocationListStub) bool {
	// Shell jobs print nothing; hello jobs print steps.
	out, _ := readStdout(a.ID)
	return regexp.MustCompile(`hello: visible GPUs`).MatchString(out)
}

var (
	stepRE         = regexp.MustCompile(`hello: step (\d+)/`)
	checkpointedRE = regexp.MustCompile(`hello: checkpointed at step (\d+), exiting`)
	resumedRE      = regexp.MustCompile(`hello: resumed from step (\d+)`)
)

// stepOf returns the number the regexp captured in out, or -1.
func stepOf(re *regexp.Regexp, out string) int {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// jobRecord reads the planner's record of a job from Consul.
func jobRecord(t testing.TB, id string) *lease.JobRecord {
	t.Helper()
	return readKV[lease.JobRecord](t, env.consul, lease.RecordKey(core.JobKey{Namespace: "default", ID: id}))
}

// allocInfo reads one allocation in full.
func allocInfo(t testing.TB, id string) *nomadapi.Allocation {
	t.Helper()
	a, _, err := env.nomad.Allocations().Info(id, nil)
	if err != nil {
		t.Fatalf("alloc %s: %v", id, err)
	}
	return a
}

// lastStepRE finds the last step hello printed.
var lastStepRE = regexp.MustCompile(`(?s).*hello: step (\d+)/`)

// watchLease records every version of a job's lease key (Consul blocking
// queries) until the test ends; seen returns them in order. Short states,
// such as a revoke that lasts as long as an instant checkpoint, are not
// missed as a poll could miss them.
func watchLease(t testing.TB, id string) (seen func() []lease.JobLease) {
	t.Helper()
	var mu sync.Mutex
	var versions []lease.JobLease
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var index uint64
		for ctx.Err() == nil {
			q := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: 5 * time.Second}).WithContext(ctx)
			p, meta, err := env.consul.KV().Get(lease.JobKey("default", id), q)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if meta.LastIndex == index {
				continue
			}
			index = meta.LastIndex
			if p == nil {
				continue
			}
			var l lease.JobLease
			if json.Unmarshal(p.Value, &l) == nil {
				mu.Lock()
				versions = append(versions, l)
				mu.Unlock()
			}
		}
	}()
	return func() []lease.JobLease {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(versions)
	}
}

// revokeOf returns the first revoke seen among a lease's versions.
func revokeOf(versions []lease.JobLease) *lease.Revoke {
	for _, l := range versions {
		if l.Revoke != nil {
			return l.Revoke
		}
	}
	return nil
}
