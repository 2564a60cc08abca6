package sim

import (
	"math"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

func themisPolicy(t testing.TB, settings ...string) core.Policy {
	t.Helper()
	k, err := core.ParseKnobs(settings)
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Build("themis", stack.Options{Knobs: k})
	if err != nil {
		t.Fatal(err)
	}
	return st.Policy
}

// A phase-2 job is submitted when the last phase-1 job of its app
// finishes, not at its trace Submit; other apps are not held.
func TestPhaseGating(t *testing.T) {
	tr := &trace.Trace{Name: "phases", Jobs: []trace.Job{
		{ID: "a-p1-t0", Submit: 0, Duration: 100, GPUs: 1, App: "a", Phase: 1, Model: "resnet50"},
		{ID: "a-p1-t1", Submit: 0, Duration: 300, GPUs: 1, App: "a", Phase: 1, Model: "resnet50"},
		{ID: "a-p2-t0", Submit: 0, Duration: 50, GPUs: 2, App: "a", Phase: 2, Model: "resnet50"},
		{ID: "b-p1-t0", Submit: 10, Duration: 20, GPUs: 1, App: "b", Phase: 1, Model: "resnet50"},
	}}
	for _, name := range []string{"fifo", "las", "themis"} {
		var pol core.Policy
		if name == "themis" {
			pol = themisPolicy(t)
		} else {
			pol = newPolicy(t, name)
		}
		r := run(t, Config{Trace: tr, Cluster: mustCluster(t)(cluster.Uniform("c", 1, 1, 4)), Policy: pol})
		byID := map[string]JobResult{}
		for _, j := range r.Jobs {
			byID[j.ID] = j
		}
		p2 := byID["a-p2-t0"]
		if !p2.Finished || math.Abs(p2.Submit-300) > 1e-6 || p2.Start < 300-1e-6 || math.Abs(p2.End-350) > 1e-6 {
			t.Errorf("%s: phase 2 submitted %v, ran %v-%v; want submitted at 300 (phase 1's end), done at 350", name, p2.Submit, p2.Start, p2.End)
		}
		if b := byID["b-p1-t0"]; b.Submit != 10 || math.Abs(b.End-30) > 1e-6 {
			t.Errorf("%s: app b ran %v-%v, want 10-30", name, b.Submit, b.End)
		}
		if len(r.Apps) != 2 || r.Apps[0].ID != "a" || r.Apps[0].Jobs != 3 || math.Abs(r.Apps[0].End-350) > 1e-6 {
			t.Fatalf("%s: apps %+v", name, r.Apps)
		}
		// App a: 100 + 300 + 2 x 50 = 500 GPU-seconds, demand 2 (each phase
		// asks for 2 GPUs), alone but for b over [10, 30]: N_avg = (350 +
		// 20) / 350; T_id = 500 / 2 x N_avg = 264.3; rho = 350 / 264.3.
		a := r.Apps[0]
		navg := 370.0 / 350
		if a.Work != 500 || a.DemandMax != 2 || math.Abs(a.NAvg-navg) > 1e-9 || math.Abs(a.Rho-350/(250*navg)) > 1e-9 {
			t.Errorf("%s: app a work %v demand %d N_avg %v rho %v; want 500, 2, %v, %v", name, a.Work, a.DemandMax, a.NAvg, a.Rho, navg, 350/(250*navg))
		}
	}
}

// A gang as large as the cluster gets its GPUs within a lease of becoming
// the worst-off app, even while small apps keep arriving (the reservation).
func TestThemisLargeGangRuns(t *testing.T) {
	tr := &trace.Trace{Name: "gang"}
	for i := range 40 {
		tr.Jobs = append(tr.Jobs, trace.Job{ID: "s" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Submit: float64(i * 300),
			Duration: 1800, GPUs: 1, App: "small" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Model: "lstm"})
	}
	tr.Jobs = append(tr.Jobs, trace.Job{ID: "big", Submit: 900, Duration: 600, GPUs: 8, App: "big", Model: "lstm"})
	sortBySubmit(tr)
	r := run(t, Config{Trace: tr, Cluster: mustCluster(t)(cluster.Uniform("c", 1, 1, 8)), Policy: themisPolicy(t)})
	for _, j := range r.Jobs {
		if !j.Finished {
			t.Fatalf("job %s did not finish", j.ID)
		}
		if j.ID == "big" && j.Start > 900+3*600 {
			t.Errorf("the 8-GPU gang started at %v, want within a few leases of its arrival at 900", j.Start)
		}
	}
}

func sortBySubmit(tr *trace.Trace) {
	for i := 1; i < len(tr.Jobs); i++ {
		for k := i; k > 0 && tr.Jobs[k].Submit < tr.Jobs[k-1].Submit; k-- {
			tr.Jobs[k], tr.Jobs[k-1] = tr.Jobs[k-1], tr.Jobs[k]
		}
	}
}
