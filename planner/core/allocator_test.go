package core

import (
	"strings"
	"testing"
	"time"
)

// fixedAllocator answers every round with the same grants and preemptions.
type fixedAllocator struct {
	grants  []Grant
	preempt []JobKey
	// seen is what the last Allocate call was given.
	seenJobs  []JobKey
	seenFree  int
	seenHeld  []Grant
	seenNodes []Node
}

func (*fixedAllocator) Name() string                  { return "fixed" }
func (*fixedAllocator) Rank(_ time.Time, jobs []*Job) { SortFIFO(jobs) }
func (*fixedAllocator) Preemptive() bool              { return true }
func (*fixedAllocator) Blocking() bool                { return false }
func (*fixedAllocator) Consolidate(*Job) bool         { return false }
func (a *fixedAllocator) Capabilities() Capabilities  { return Capabilities{Policy: a, Allocator: a} }
func (a *fixedAllocator) Allocate(_ time.Time, jobs []*Job, free *FreeGPUs, held []Grant) ([]Grant, []JobKey) {
	a.seenJobs = nil
	for _, j := range jobs {
		a.seenJobs = append(a.seenJobs, j.Key)
	}
	a.seenFree, a.seenHeld, a.seenNodes = free.Total(), held, free.FreeNodes()
	return a.grants, a.preempt
}

func TestAllocatorHook(t *testing.T) {
	nodes := []Node{node8("n0")}
	key := func(id string) JobKey { return JobKey{"default", id} }
	jobs := []Job{
		job("run", 2, 1, Granted),
		job("q1", 2, 2, Queued),
		job("q2", 1, 3, Queued),
		job("q3", 4, 4, Queued),
		job("done", 1, 0, Finished),
	}
	held := []Grant{grant("run", "id-n0", "n0-0", "n0-1")}
	a := &fixedAllocator{
		grants: []Grant{
			grant("q1", "id-n0", "n0-2", "n0-3"),                 // ok
			grant("q2", "id-n0", "n0-3"),                         // n0-3 just went to q1
			grant("q3", "id-n0", "n0-4", "n0-5", "n0-6"),         // 3 GPUs for a gang of 4
			grant("run", "id-n0", "n0-0", "n0-1"),                // running and not preempted
			grant("ghost", "id-n0", "n0-7"),                      // not an active job
			grant("q1", "id-n0", "n0-6", "n0-7"),                 // granted twice
			grant("q3", "id-n0", "n0-4", "n0-5", "n0-6", "n0-7"), // ok
		},
		preempt: []JobKey{key("q2"), key("ghost")}, // not running: ignored
	}
	d := Scheduler{Policy: a, ExplainWaits: true}.Decide(State{Nodes: nodes, Jobs: jobs, Grants: held}, time.Unix(10, 0))
	var got []string
	for _, act := range d.Actions {
		switch act := act.(type) {
		case GrantAction:
			got = append(got, "grant "+act.Grant.Job.ID)
		case PreemptAction:
			got = append(got, "preempt "+act.Grant.Job.ID)
		default:
			got = append(got, "other")
		}
	}
	if strings.Join(got, ",") != "grant q1,grant q3" {
		t.Errorf("actions %v, want grant q1, grant q3", got)
	}
	if a.seenFree != 6 || len(a.seenHeld) != 1 || a.seenHeld[0].Job != key("run") || len(a.seenJobs) != 4 {
		t.Errorf("allocator saw %d free GPUs, held %v, jobs %v; want 6, run's grant, 4 active jobs", a.seenFree, a.seenHeld, a.seenJobs)
	}
	if len(a.seenNodes) != 1 || len(a.seenNodes[0].GPUs) != 6 || a.seenNodes[0].GPUs[0].ID != "n0-2" {
		t.Errorf("FreeNodes = %+v, want n0 with its 6 free GPUs from n0-2", a.seenNodes)
	}
	reasons := map[string]string{}
	for _, w := range d.Waits {
		reasons[w.Job.ID] += w.Reason + ";"
	}
	for id, want := range map[string]string{"q2": "not free", "run": "runs or was granted", "ghost": "not active"} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("wait of %s = %q, want it to say %q", id, reasons[id], want)
		}
	}
	if !strings.Contains(reasons["q2"], "not allocated") {
		t.Errorf("q2 should also wait as not allocated this round: %q", reasons["q2"])
	}
}

// A preemption comes before the grants, frees its GPUs for them, and may
// move the preempted job in the same round.
func TestAllocatorPreemptsFirst(t *testing.T) {
	nodes := []Node{node8("n0")}
	jobs := []Job{job("a", 4, 1, Granted), job("b", 4, 2, Granted), job("c", 4, 3, Queued)}
	held := []Grant{grant("a", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3"), grant("b", "id-n0", "n0-4", "n0-5", "n0-6", "n0-7")}
	a := &fixedAllocator{
		grants: []Grant{
			grant("c", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3"), // a's GPUs
			grant("a", "id-n0", "n0-4", "n0-5", "n0-6", "n0-7"), // a moves to b's
		},
		preempt: []JobKey{{"default", "a"}, {"default", "b"}},
	}
	d := Scheduler{Policy: a}.Decide(State{Nodes: nodes, Jobs: jobs, Grants: held}, time.Unix(10, 0))
	var got []string
	for _, act := range d.Actions {
		switch act := act.(type) {
		case GrantAction:
			got = append(got, "grant "+act.Grant.Job.ID)
		case PreemptAction:
			got = append(got, "preempt "+act.Grant.Job.ID)
		}
	}
	if strings.Join(got, ",") != "preempt a,preempt b,grant c,grant a" {
		t.Errorf("actions %v", got)
	}
}
