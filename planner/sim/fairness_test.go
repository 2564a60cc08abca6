package sim

import (
	"math"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/trace"
)

// An app alone on the empty cluster: a single job runs at once (floor 1);
// a sweep whose second job arrives after its first ends has T_id = its
// work over both jobs' GPUs (100 s) but takes 200 s (floor 2); a gang larger
// than a machine runs spread (floor = its cross-machine slowdown).
func TestFloors(t *testing.T) {
	cl, err := cluster.Preset("themis")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace.Trace{Name: "floors", Jobs: []trace.Job{
		{ID: "one", GPUs: 2, Duration: 100, Submit: 0, Model: "cv-resnet50"},
		{ID: "s1", App: "s", GPUs: 1, Duration: 100, Submit: 0, Model: "cv-resnet50"},
		{ID: "s2", App: "s", GPUs: 1, Duration: 100, Submit: 100, Model: "cv-resnet50"},
		{ID: "big", GPUs: 16, Duration: 100, Submit: 0, Model: "cv-resnet50"},
	}}
	f, err := Floors(tr, cl, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(f["one"]-1) > 1e-9 || math.Abs(f["s"]-2) > 1e-9 {
		t.Errorf("floors one %v s %v, want 1 and 2", f["one"], f["s"])
	}
	if !(f["big"] > 1) {
		t.Errorf("floor of a 16-GPU gang %v, want its cross-machine slowdown (> 1)", f["big"])
	}
}

// Runs on the same trace share each app's least T_id; another trace's
// runs are apart.
func TestShareIdeal(t *testing.T) {
	a := &Result{Trace: "t", Apps: []AppResult{{ID: "x", Finished: true, Arrival: 0, End: 30, Ideal: 20}, {ID: "y", Arrival: 0, Ideal: 5}}}
	b := &Result{Trace: "t", Apps: []AppResult{{ID: "x", Finished: true, Arrival: 0, End: 10, Ideal: 10}, {ID: "y", Finished: true, End: 5, Ideal: 50}}}
	c := &Result{Trace: "u", Apps: []AppResult{{ID: "x", Finished: true, Arrival: 0, End: 30, Ideal: 60}}}
	ShareIdeal([]*Result{a, b, c})
	if a.Apps[0].SharedIdeal != 10 || a.Apps[0].SharedRho != 3 || b.Apps[0].SharedRho != 1 {
		t.Errorf("x: %+v %+v, want T_id 10 shared", a.Apps[0], b.Apps[0])
	}
	if !math.IsInf(a.Apps[1].SharedRho, 1) || b.Apps[1].SharedIdeal != 50 {
		t.Errorf("y: %+v %+v, want +Inf where unfinished, T_id from the run that finished", a.Apps[1], b.Apps[1])
	}
	if c.Apps[0].SharedIdeal != 60 || c.Apps[0].SharedRho != 0.5 {
		t.Errorf("other trace: %+v", c.Apps[0])
	}
}

// AppResults on a run's own job results gives the run's apps (less their
// placement): what a live run's jobs are compared with.
func TestAppResultsFromJobResults(t *testing.T) {
	cl, err := cluster.Preset("themis")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace.Trace{Name: "apps", Jobs: []trace.Job{
		{ID: "s1", App: "s", GPUs: 4, Duration: 100, Submit: 0},
		{ID: "s2", App: "s", GPUs: 4, Duration: 50, Submit: 10},
		{ID: "big", GPUs: 16, Duration: 80, Submit: 5},
		{ID: "late", App: "l", GPUs: 8, Duration: 30, Submit: 60},
	}}
	r, err := Run(Config{Trace: tr, Cluster: cl, Policy: policies.FIFO{}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := AppResults(r.Jobs, r.TotalGPUs)
	if len(got) != len(r.Apps) {
		t.Fatalf("%d apps, want %d", len(got), len(r.Apps))
	}
	for i, a := range r.Apps {
		g := got[i]
		if g.ID != a.ID || g.End != a.End || g.Arrival != a.Arrival || math.Abs(g.Rho-a.Rho) > 1e-12 || g.NAvg != a.NAvg {
			t.Errorf("app %s: %+v, the run says %+v", a.ID, g, a)
		}
	}
}

// With UnknownUntilRun the policy sees no remaining time or work for a
// job until it has run: SRTF (which orders by remaining time) then cannot
// put the short job that arrives second ahead of the long one.
func TestUnknownUntilRun(t *testing.T) {
	cl, err := cluster.Mixed("one", cluster.NodeGroup{Count: 1, GPUsPerNode: 4})
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace.Trace{Name: "u", Jobs: []trace.Job{
		{ID: "run", GPUs: 4, Duration: 100, Submit: 0},
		{ID: "long", GPUs: 4, Duration: 300, Submit: 1},
		{ID: "short", GPUs: 4, Duration: 10, Submit: 2},
	}}
	ends := func(unknown bool) map[string]float64 {
		r, err := Run(Config{Trace: tr, Cluster: cl, Policy: policies.SRTF{}, Seed: 1, UnknownUntilRun: unknown})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, j := range r.Jobs {
			out[j.ID] = j.End
		}
		return out
	}
	known, unknown := ends(false), ends(true)
	if !(known["short"] < known["long"]) {
		t.Errorf("known remaining times: short ends %v, long %v; want short first", known["short"], known["long"])
	}
	if !(unknown["short"] > unknown["long"]) {
		t.Errorf("unknown until run: short ends %v, long %v; want arrival order (the policy cannot tell)", unknown["short"], unknown["long"])
	}
}
