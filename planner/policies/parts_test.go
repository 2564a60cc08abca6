package policies

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// Equal parts (core/parts.go) with the policies: gangs larger than a node
// in a queue walk, a preemptive ranking and FitGpp's room making.

func TestEqualPartsDecide(t *testing.T) {
	nodes := []core.Node{nodeN("n0", "rack0", 8), nodeN("n1", "rack0", 8), nodeN("n2", "rack1", 8)}
	jobs := []core.Job{job("gang16", 16, 1, core.Queued), job("odd17", 17, 2, core.Queued), job("small", 8, 3, core.Queued)}
	d := core.Scheduler{Policy: policy(t, "fifo-skip"), ExplainWaits: true, EqualParts: true}.Decide(core.State{Nodes: nodes, Jobs: jobs}, time.Unix(100, 0))
	granted := map[string]int{}
	for _, a := range d.Actions {
		if g, ok := a.(core.GrantAction); ok {
			granted[g.Grant.Job.ID] = len(g.Grant.GPUs)
		}
	}
	if granted["gang16"] != 16 || granted["small"] != 8 || len(granted) != 2 {
		t.Fatalf("granted %v, want gang16 (16) and small (8)", granted)
	}
	var why string
	for _, w := range d.Waits {
		if w.Job.ID == "odd17" {
			why = w.Reason
		}
	}
	if !strings.Contains(why, "equal parts") {
		t.Fatalf("odd17 waits with %q, want a reason about equal parts", why)
	}

	// Preemptive: a 16-GPU gang of a higher Tiresias queue takes two
	// nodes from jobs that have run longer; a 17-GPU one preempts nobody.
	running := []core.Job{
		with(job("old0", 8, 1, core.Granted), started(10, 5000)),
		with(job("old1", 8, 2, core.Granted), started(10, 5000)),
		job("new16", 16, 50, core.Queued),
		job("odd17", 17, 60, core.Queued),
	}
	grants := []core.Grant{
		grant("old0", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7"),
		grant("old1", "id-n1", "n1-0", "n1-1", "n1-2", "n1-3", "n1-4", "n1-5", "n1-6", "n1-7"),
	}
	d = core.Scheduler{Policy: policy(t, "tiresias-las"), ExplainWaits: true, EqualParts: true}.Decide(core.State{Nodes: nodes, Jobs: running, Grants: grants}, time.Unix(100, 0))
	var preempted, got []string
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.PreemptAction:
			preempted = append(preempted, a.Grant.Job.ID)
		case core.GrantAction:
			got = append(got, a.Grant.Job.ID)
		}
	}
	// new16 (no service) outranks both; 8 of the 24 GPUs are left for
	// old0 (submitted first), old1 goes, and new16 gets n1 and n2 whole.
	if fmt.Sprint(preempted) != "[old1]" || fmt.Sprint(got) != "[new16]" {
		t.Fatalf("preempted %v, granted %v; want [old1], [new16]", preempted, got)
	}
	for _, w := range d.Waits {
		if w.Job.ID == "odd17" && !strings.Contains(w.Reason, "equal parts") {
			t.Fatalf("odd17 waits with %q", w.Reason)
		}
	}
}

// FitGpp live: a TE gang of two nodes makes room by preempting a BE gang
// (a victim spanning nodes), or a BE job whose node, with the free one,
// holds the TE gang; the simulator's FitGpp keeps its one-node rule.
func TestEqualPartsFitGppMakesRoomForGangs(t *testing.T) {
	nodes := []core.Node{nodeN("n0", "rack0", 8), nodeN("n1", "rack0", 8), nodeN("n2", "rack1", 8)}
	be := func(id string, gpus int) core.Job {
		j := with(job(id, gpus, 1, core.Granted), started(10, 50))
		j.Class = core.ClassBestEffort
		return j
	}
	te := job("te", 16, 50, core.Queued)
	te.Class = core.ClassTrialAndError
	teRun := with(job("te-run", 8, 2, core.Granted), started(10, 50))
	teRun.Class = core.ClassTrialAndError
	all := func(n string) []string {
		var out []string
		for i := range 8 {
			out = append(out, fmt.Sprintf("%s-%d", n, i))
		}
		return out
	}
	cases := []struct {
		name      string
		equal     bool
		jobs      []core.Job
		grants    []core.Grant
		preempted string
	}{
		{name: "a BE gang on two nodes", equal: true, jobs: []core.Job{be("gang", 16), te},
			grants: []core.Grant{{Job: core.JobKey{Namespace: "default", ID: "gang"}, GPUs: append(all("n0"), all("n1")...)}}, preempted: "[gang]"},
		{name: "a BE job on one node, a TE job on another, the third free", equal: true, jobs: []core.Job{be("one", 8), teRun, te},
			grants: []core.Grant{grant("one", "id-n0", all("n0")...), grant("te-run", "id-n1", all("n1")...)}, preempted: "[one]"},
		{name: "simulator: no room across nodes", equal: false, jobs: []core.Job{be("gang", 16), te},
			grants: []core.Grant{{Job: core.JobKey{Namespace: "default", ID: "gang"}, GPUs: append(all("n0"), all("n1")...)}}, preempted: "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := core.Scheduler{Policy: policy(t, "fitgpp"), ExplainWaits: true, EqualParts: c.equal}.Decide(core.State{Nodes: nodes, Jobs: c.jobs, Grants: c.grants}, time.Unix(100, 0))
			checkRoomFor(t, d, c.preempted)
		})
	}
}

// checkRoomFor checks that a decision preempted exactly the jobs preempted
// names (fmt.Sprint of their IDs, in order) and granted the job "te" when
// it preempted any.
func checkRoomFor(t *testing.T, d core.Decision, preempted string) {
	t.Helper()
	var got []string
	granted := false
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.PreemptAction:
			got = append(got, a.Grant.Job.ID)
		case core.GrantAction:
			granted = granted || a.Grant.Job.ID == "te"
		}
	}
	if fmt.Sprint(got) != preempted || granted != (preempted != "[]") {
		t.Fatalf("preempted %v, te granted %v; want %s", got, granted, preempted)
	}
}
