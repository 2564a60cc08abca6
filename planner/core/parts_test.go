package core

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// nodeN is a node of n GPUs in rack, all in one cell.
func nodeN(name, rack string, n int) Node {
	nd := Node{ID: "id-" + name, Name: name, Rack: rack, Schedulable: true}
	for i := 0; i < n; i++ {
		nd.GPUs = append(nd.GPUs, GPU{ID: fmt.Sprintf("%s-%d", name, i), Index: i, Healthy: true})
	}
	return nd
}

func TestShape(t *testing.T) {
	mixed := []Node{nodeN("a", "r0", 8), nodeN("b", "r0", 8), nodeN("c", "r1", 8), nodeN("d", "r1", 4)}
	cases := []struct {
		k, nodes, per int
		ok            bool
	}{
		{k: 3, nodes: 1, per: 3, ok: true},
		{k: 8, nodes: 1, per: 8, ok: true},
		{k: 16, nodes: 2, per: 8, ok: true},
		{k: 12, nodes: 2, per: 6, ok: true},
		{k: 24, nodes: 3, per: 8, ok: true},
		{k: 9, nodes: 3, per: 3, ok: true},
		{k: 28, nodes: 4, per: 7, ok: false}, // d has only 4: no 4 nodes of 7
		{k: 17, ok: false},
		{k: 40, ok: false},
		{k: 0, ok: false},
	}
	x := NewClusterIndex(mixed)
	for _, c := range cases {
		n, per, ok := x.Shape(c.k)
		if ok != c.ok || (ok && (n != c.nodes || per != c.per)) {
			t.Errorf("Shape(%d) = %d x %d, %v; want %d x %d, %v", c.k, n, per, ok, c.nodes, c.per, c.ok)
		}
	}
}

// partsOf groups a grant's GPUs by node, in grant order.
func partsOf(g Grant) []string {
	var out []string
	last := ""
	for _, id := range g.GPUs {
		node := id[:strings.LastIndex(id, "-")]
		if node != last {
			out = append(out, node)
			last = node
		}
	}
	return out
}

func TestEqualPartsPlacement(t *testing.T) {
	three := func() []Node {
		return []Node{nodeN("n0", "rack0", 8), nodeN("n1", "rack0", 8), nodeN("n2", "rack1", 8)}
	}
	cases := []struct {
		name   string
		nodes  []Node
		grants []Grant
		gpus   int
		// want is the nodes of the grant in rank order; nil: not placed.
		want []string
		per  int
	}{
		{name: "a node's worth stays on one node", nodes: three(), gpus: 8, want: []string{"n0"}, per: 8},
		{name: "16 on 8-GPU nodes: two whole nodes of one rack", nodes: three(), gpus: 16, want: []string{"n0", "n1"}, per: 8},
		{name: "24: all three nodes across racks", nodes: three(), gpus: 24, want: []string{"n0", "n1", "n2"}, per: 8},
		{name: "12: 2 x 6 in one rack", nodes: three(), gpus: 12, want: []string{"n0", "n1"}, per: 6},
		{name: "12 with rack0 partly held: 2 x 6 across racks", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3")}, gpus: 12, want: []string{"n1", "n2"}, per: 6},
		{name: "12 with 3 free on n0: best fit leaves n0 for small jobs", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4")}, gpus: 12, want: []string{"n1", "n2"}, per: 6},
		{name: "a small gang never spreads", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4"), grant("y", "id-n1", "n1-0", "n1-1", "n1-2", "n1-3", "n1-4"), grant("z", "id-n2", "n2-0", "n2-1", "n2-2", "n2-3", "n2-4")},
			gpus:   4},
		{name: "16 with one node partly held: waits, no unequal split", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0")}, gpus: 16, want: []string{"n1", "n2"}, per: 8},
		{name: "16 with two nodes partly held: waits", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0"), grant("y", "id-n1", "n1-0")}, gpus: 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewFreeGPUs(c.nodes, c.grants)
			f.EqualParts()
			g, ok := f.PlaceJob(&Job{Key: JobKey{"default", "gang"}, GPUs: c.gpus}, false)
			if c.want == nil {
				if ok {
					t.Fatalf("placed %v, want wait", g)
				}
				return
			}
			if !ok {
				t.Fatalf("not placed, want %v", c.want)
			}
			if got := partsOf(g); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("parts %v (%v), want %v", got, g.GPUs, c.want)
			}
			if len(g.GPUs) != c.per*len(c.want) {
				t.Fatalf("%d GPUs, want %d x %d", len(g.GPUs), len(c.want), c.per)
			}
			if len(c.want) > 1 && g.Node != "" {
				t.Fatalf("multi-node grant names node %q", g.Node)
			}
		})
	}
}

func TestEqualPartsDecide(t *testing.T) {
	nodes := []Node{nodeN("n0", "rack0", 8), nodeN("n1", "rack0", 8), nodeN("n2", "rack1", 8)}
	jobs := []Job{job("gang16", 16, 1, Queued), job("odd17", 17, 2, Queued), job("small", 8, 3, Queued)}
	d := Scheduler{Policy: policy(t, "fifo-skip"), ExplainWaits: true, EqualParts: true}.Decide(State{Nodes: nodes, Jobs: jobs}, time.Unix(100, 0))
	granted := map[string]int{}
	for _, a := range d.Actions {
		if g, ok := a.(GrantAction); ok {
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
	running := []Job{
		with(job("old0", 8, 1, Granted), started(10, 5000)),
		with(job("old1", 8, 2, Granted), started(10, 5000)),
		job("new16", 16, 50, Queued),
		job("odd17", 17, 60, Queued),
	}
	grants := []Grant{
		grant("old0", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7"),
		grant("old1", "id-n1", "n1-0", "n1-1", "n1-2", "n1-3", "n1-4", "n1-5", "n1-6", "n1-7"),
	}
	d = Scheduler{Policy: policy(t, "tiresias-las"), ExplainWaits: true, EqualParts: true}.Decide(State{Nodes: nodes, Jobs: running, Grants: grants}, time.Unix(100, 0))
	var preempted, got []string
	for _, a := range d.Actions {
		switch a := a.(type) {
		case PreemptAction:
			preempted = append(preempted, a.Grant.Job.ID)
		case GrantAction:
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
	nodes := []Node{nodeN("n0", "rack0", 8), nodeN("n1", "rack0", 8), nodeN("n2", "rack1", 8)}
	be := func(id string, gpus int) Job {
		j := with(job(id, gpus, 1, Granted), started(10, 50))
		j.Class = ClassBestEffort
		return j
	}
	te := job("te", 16, 50, Queued)
	te.Class = ClassTrialAndError
	teRun := with(job("te-run", 8, 2, Granted), started(10, 50))
	teRun.Class = ClassTrialAndError
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
		jobs      []Job
		grants    []Grant
		preempted string
	}{
		{name: "a BE gang on two nodes", equal: true, jobs: []Job{be("gang", 16), te},
			grants: []Grant{{Job: JobKey{"default", "gang"}, GPUs: append(all("n0"), all("n1")...)}}, preempted: "[gang]"},
		{name: "a BE job on one node, a TE job on another, the third free", equal: true, jobs: []Job{be("one", 8), teRun, te},
			grants: []Grant{grant("one", "id-n0", all("n0")...), grant("te-run", "id-n1", all("n1")...)}, preempted: "[one]"},
		{name: "simulator: no room across nodes", equal: false, jobs: []Job{be("gang", 16), te},
			grants: []Grant{{Job: JobKey{"default", "gang"}, GPUs: append(all("n0"), all("n1")...)}}, preempted: "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Scheduler{Policy: policy(t, "fitgpp"), ExplainWaits: true, EqualParts: c.equal}.Decide(State{Nodes: nodes, Jobs: c.jobs, Grants: c.grants}, time.Unix(100, 0))
			checkRoomFor(t, d, c.preempted)
		})
	}
}

// checkRoomFor checks that a decision preempted exactly the jobs preempted
// names (fmt.Sprint of their IDs, in order) and granted the job "te" when
// it preempted any.
func checkRoomFor(t *testing.T, d Decision, preempted string) {
	t.Helper()
	var got []string
	granted := false
	for _, a := range d.Actions {
		switch a := a.(type) {
		case PreemptAction:
			got = append(got, a.Grant.Job.ID)
		case GrantAction:
			granted = granted || a.Grant.Job.ID == "te"
		}
	}
	if fmt.Sprint(got) != preempted || granted != (preempted != "[]") {
		t.Fatalf("preempted %v, te granted %v; want %s", got, granted, preempted)
	}
}
