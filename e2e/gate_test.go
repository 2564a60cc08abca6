package e2e

import (
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/nomad"
)

// A themis job submitted straight into a real node pool, bypassing the gate,
// never runs without a lease. Nomad may place it before the planner moves it
// to the pending pool; that allocation is then either stopped before its task
// starts, or refused by the driver's lease check. The job ends up granted and
// run from a pinned version.
func TestUngatedJobNeverRunsWithoutLease(t *testing.T) {
	const id = "e2e-ungated"
	job := helloJob(t, id, 5, 1)
	pool := "default"
	job.NodePool = &pool
	register(t, job)

	waitDead(t, id, 60*time.Second)
	ran := 0
	for _, stub := range allocs(t, id) {
		a, _, err := env.nomad.Allocations().Info(stub.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		events := a.TaskStates["hello"].Events
		if !hasEvent(events, nomadapi.TaskStarted) {
			out, _ := readStdout(a.ID)
			if strings.Contains(out, "hello:") {
				t.Fatalf("alloc %s has no Started event but its task printed:\n%s", a.ID, out)
			}
			continue
		}
		ran++
		if a.Job.Meta[nomad.LeaseMeta] == "" {
			t.Fatalf("alloc %s started from job version %d, which carries no lease", a.ID, *a.Job.Version)
		}
		if !hasMessage(events, "GPU leases verified") {
			t.Fatalf("alloc %s started without the driver verifying its lease: %+v", a.ID, events)
		}
		visibleGPUs(t, taskStdout(t, a.ID))
	}
	if ran != 1 {
		t.Fatalf("%d allocations started, want exactly 1 (the granted one)", ran)
	}
}

func hasEvent(evs []*nomadapi.TaskEvent, typ string) bool {
	for _, ev := range evs {
		if ev.Type == typ {
			return true
		}
	}
	return false
}

func hasMessage(evs []*nomadapi.TaskEvent, sub string) bool {
	for _, ev := range evs {
		if strings.Contains(ev.DisplayMessage, sub) || strings.Contains(ev.Message, sub) {
			return true
		}
	}
	return false
}
