package planner

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/nomad"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// A job that resumes from a private file and never publishes a COMPLETE
// checkpoint must not look infinitely expensive to preempt under
// least-lost-work: what it would lose is counted at most since its grant
// (its current lease's run), never its whole execution. Here it ran an
// hour under an earlier lease and two minutes under this one; an honest
// job's newest checkpoint is five minutes old.
func TestHiddenCheckpointsBoundLostWork(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	now := t0.Add(2 * time.Minute)
	job, err := nomad.ParseJob(&api.Job{ID: ptr("hider"), Namespace: ptr("default"), TaskGroups: []*api.TaskGroup{{Name: ptr("g"),
		Tasks: []*api.Task{{Name: "t", Driver: nomad.DriverName, Config: map[string]any{"themis": []any{map[string]any{"gpus": 2.0}}}}}}}})
	if err != nil || job.Err != nil {
		t.Fatal(err, job.Err)
	}
	p := New(Config{Stack: stack.Of(policies.FIFO{})})
	rec := lease.JobRecord{Namespace: "default", JobID: "hider", Executed: 3600, Attained: 7200, Preemptions: 1, FirstSubmit: t0.Add(-2 * time.Hour)}
	l := lease.JobLease{LeaseID: "L2", GrantedAt: t0, GPUs: []string{"g0", "g1"}}
	allocs := []nomad.Alloc{{ClientStatus: "running", Created: t0, Started: t0}}
	hider := p.account(job, core.Granted, rec, &l, allocs, lease.CheckpointRecord{}, now)
	honest := core.Job{GPUs: 2, CheckpointAge: 300, Executed: 3900}
	if got := hider.LostWork(); got > 120*2 {
		t.Errorf("the hider would lose %g GPU-seconds, want at most its 2 minutes under this lease (240); an honest job with a 5-minute-old checkpoint loses %g", got, honest.LostWork())
	}
}
