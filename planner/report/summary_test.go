package report

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/sim"
)

// finished is a finished job: submitted at submit, waited queue, ran for
// run (its trace duration too).
func finished(id string, gpus int, submit, queue, run float64) sim.JobResult {
	return sim.JobResult{
		ID: id, VC: "vc1", Model: "resnet50", GPUs: gpus,
		Submit: submit, Start: submit + queue, End: submit + queue + run,
		Duration: run, Queue: queue, Started: true, Finished: true,
	}
}

func TestSummarize(t *testing.T) {
	// Four finished jobs with JCTs 10, 20, 30, 100 and queueing delays
	// 0, 5, 10, 45, and one that never started.
	fourJobs := sim.Result{
		Policy: "fifo", Trace: "t", Cluster: "c", Seed: 3, TotalGPUs: 4,
		Settings: []string{"a=1"},
		Jobs: []sim.JobResult{
			finished("j1", 1, 0, 0, 10),
			finished("j2", 2, 0, 5, 15),
			finished("j3", 1, 10, 10, 20),
			finished("j4", 4, 0, 45, 55),
			{ID: "j5", GPUs: 8, Submit: 50, Duration: 10, Queue: 50},
		},
		Util:        []sim.UtilSample{{T: 0, Busy: 2}, {T: 10, Busy: 4}, {T: 20, Busy: 0}},
		Makespan:    100,
		Preemptions: 2,
		Restarts:    []float64{30, 10, 20},
		WallSeconds: 0.5,
	}
	// Slowdowns 1 and 4/3 for TE jobs, 1.5 and 100/55 for BE jobs; the
	// TE job that never started does not count.
	for i, class := range []string{"te", "te", "be", "be", "te"} {
		fourJobs.Jobs[i].Class = class
	}
	fourJobs.Jobs[3].Preemptions = 2
	tests := []struct {
		name string
		r    sim.Result
		want Summary
	}{
		{
			name: "four finished, one never started",
			r:    fourJobs,
			want: Summary{
				Policy: "fifo", Trace: "t", Cluster: "c", Seed: 3, TotalGPUs: 4,
				Settings: []string{"a=1"},
				Jobs:     5, Started: 4, Finished: 4,
				AvgJCT: 40, MedianJCT: 20, P95JCT: 100, P99JCT: 100, MaxJCT: 100,
				AvgQueue: 15, MedianQueue: 5, P95Queue: 45,
				Makespan: 100, GPUTime: 60, Utilization: 0.15,
				Preemptions: 2, Wall: 0.5,
				ClassSummary: ClassSummary{TEMedianSlowdown: 1, TEP95Slowdown: Num(20.0 / 15),
					BEMedianSlowdown: 1.5, BEP95Slowdown: Num(100.0 / 55),
					PreemptedJobs: 1, MedianRestart: 20, P95Restart: 30},
				AppFairness: AppFairness{MaxRho: nan, MedianRho: nan, P95Rho: nan, P99Rho: nan, FracRhoLE1: nan, AvgPlacementScore: nan},
			},
		},
		{
			name: "empty run",
			r:    sim.Result{Policy: "fifo"},
			want: Summary{
				Policy: "fifo", Settings: []string{},
				AvgJCT: nan, MedianJCT: nan, P95JCT: nan, P99JCT: nan, MaxJCT: nan,
				AvgQueue: nan, MedianQueue: nan, P95Queue: nan,
				Makespan: 0, GPUTime: 0, Utilization: nan,
				ClassSummary: ClassSummary{TEMedianSlowdown: nan, TEP95Slowdown: nan, BEMedianSlowdown: nan, BEP95Slowdown: nan,
					MedianRestart: nan, P95Restart: nan},
				AppFairness: AppFairness{MaxRho: nan, MedianRho: nan, P95Rho: nan, P99Rho: nan, FracRhoLE1: nan, AvgPlacementScore: nan},
			},
		},
		{
			name: "nothing finished",
			r: sim.Result{
				Policy: "p", TotalGPUs: 2, Makespan: 10,
				Jobs: []sim.JobResult{{ID: "a", GPUs: 2, Started: true, Queue: 3}},
				Util: []sim.UtilSample{{T: 3, Busy: 2}},
			},
			want: Summary{
				Policy: "p", TotalGPUs: 2, Settings: []string{}, Jobs: 1, Started: 1,
				AvgJCT: nan, MedianJCT: nan, P95JCT: nan, P99JCT: nan, MaxJCT: nan,
				AvgQueue: nan, MedianQueue: nan, P95Queue: nan,
				Makespan: 10, GPUTime: 14, Utilization: 0.7,
				ClassSummary: ClassSummary{TEMedianSlowdown: nan, TEP95Slowdown: nan, BEMedianSlowdown: nan, BEP95Slowdown: nan,
					MedianRestart: nan, P95Restart: nan},
				AppFairness: AppFairness{MaxRho: nan, MedianRho: nan, P95Rho: nan, P99Rho: nan, FracRhoLE1: nan, AvgPlacementScore: nan},
			},
		},
		{
			name: "no GPUs: utilization undefined",
			r:    sim.Result{Makespan: 10, Util: []sim.UtilSample{{T: 0, Busy: 0}}},
			want: Summary{
				Settings: []string{},
				AvgJCT:   nan, MedianJCT: nan, P95JCT: nan, P99JCT: nan, MaxJCT: nan,
				AvgQueue: nan, MedianQueue: nan, P95Queue: nan,
				Makespan: 10, GPUTime: 0, Utilization: nan,
				ClassSummary: ClassSummary{TEMedianSlowdown: nan, TEP95Slowdown: nan, BEMedianSlowdown: nan, BEP95Slowdown: nan,
					MedianRestart: nan, P95Restart: nan},
				AppFairness: AppFairness{MaxRho: nan, MedianRho: nan, P95Rho: nan, P99Rho: nan, FracRhoLE1: nan, AvgPlacementScore: nan},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			compareFields(t, reflect.ValueOf(Summarize(tc.r)), reflect.ValueOf(tc.want))
		})
	}
}

func TestSummaryJSONFields(t *testing.T) {
	b, err := marshalJSON(Summarize(sim.Result{}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b2s(b), "NaN") || strings.Contains(b2s(b), "Inf") {
		t.Fatalf("summary of an empty run has a non-number:\n%s", b)
	}
	dec := json.NewDecoder(strings.NewReader(b2s(b)))
	var keys []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"policy", "trace", "cluster", "seed", "total_gpus", "settings",
		"jobs", "started", "finished",
		"avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s", "max_jct_s",
		"avg_queue_s", "median_queue_s", "p95_queue_s",
		"makespan_s", "gpu_time_s", "utilization", "preemptions",
		"te_median_slowdown", "te_p95_slowdown", "be_median_slowdown", "be_p95_slowdown",
		"preempted_jobs", "median_restart_s", "p95_restart_s",
		"apps", "apps_finished", "max_rho", "median_rho", "p95_rho", "p99_rho", "frac_rho_le_1", "avg_placement_score", "wall_s",
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("summary.json keys\n got %v\nwant %v", keys, want)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["avg_jct_s"] != nil || back["utilization"] != nil {
		t.Errorf("undefined statistics should be null, got avg_jct_s=%v utilization=%v",
			back["avg_jct_s"], back["utilization"])
	}
}

func b2s(b []byte) string { return string(b) }

func TestSummarizeFairness(t *testing.T) {
	r := sim.Result{
		Policy: "themis", TotalGPUs: 4,
		Jobs: []sim.JobResult{
			{ID: "a", Started: true, Finished: true, Placement: 1},
			{ID: "b", Started: true, Finished: true, Placement: 1.2},
			{ID: "c", Started: true},
		},
		Apps: []sim.AppResult{
			{ID: "x", Finished: true, Rho: 0.5},
			{ID: "y", Finished: true, Rho: 1},
			{ID: "z", Finished: true, Rho: 3},
			{ID: "w", Rho: math.Inf(1)},
		},
	}
	s := Summarize(r)
	if s.Apps != 4 || s.AppsFinished != 3 {
		t.Errorf("apps %d finished %d, want 4 and 3", s.Apps, s.AppsFinished)
	}
	if !math.IsInf(float64(s.MaxRho), 1) || s.MedianRho != 1 || s.FracRhoLE1 != 0.5 {
		t.Errorf("max rho %v median %v frac %v, want +Inf, 1, 0.5", s.MaxRho, s.MedianRho, s.FracRhoLE1)
	}
	if math.Abs(float64(s.AvgPlacementScore)-1.1) > 1e-12 {
		t.Errorf("placement %v, want 1.1", s.AvgPlacementScore)
	}
}

// compareFields compares two structs field by field, Nums as same does
// (NaN equals NaN), embedded structs field by field too.
func compareFields(t *testing.T, gv, wv reflect.Value) {
	t.Helper()
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			compareFields(t, gv.Field(i), wv.Field(i))
			continue
		}
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		if gn, ok := g.(Num); ok {
			if !same(gn, w.(Num)) {
				t.Errorf("%s = %v, want %v", f.Name, gn, w)
			}
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("%s = %#v, want %#v", f.Name, g, w)
		}
	}
}

// Shared T_id and floors (set by sim.ShareIdeal and sim.Floors) give the
// summary its shared-rho and rho / floor fields; without them they stay
// out of summary.json.
func TestSummarizeSharedAndFloors(t *testing.T) {
	r := sim.Result{Apps: []sim.AppResult{
		{ID: "x", Finished: true, Rho: 0.5},
		{ID: "y", Finished: true, Rho: 2},
	}}
	if s := Summarize(r); s.MaxSharedRho != nil || s.MaxRhoOverFloor != nil || s.AppsFloorAbove1 != nil {
		t.Fatalf("without shared T_id or floors: %+v", s.AppFairness)
	}
	r.Apps[0].SharedIdeal, r.Apps[0].SharedRho, r.Apps[0].Floor = 10, 0.8, 0.25
	r.Apps[1].SharedIdeal, r.Apps[1].SharedRho, r.Apps[1].Floor = 10, 2.5, 1.6
	s := Summarize(r)
	if s.MaxSharedRho == nil || *s.MaxSharedRho != 2.5 || *s.P95SharedRho != 2.5 {
		t.Errorf("shared rho: %v %v, want 2.5", s.MaxSharedRho, s.P95SharedRho)
	}
	if s.MaxRhoOverFloor == nil || *s.MaxRhoOverFloor != 2 || *s.AppsFloorAbove1 != 1 {
		t.Errorf("rho / floor %v, floors above 1 %v; want 2 (x: 0.5 / 0.25) and 1", s.MaxRhoOverFloor, s.AppsFloorAbove1)
	}
	if s.P95Rho != 2 || s.P99Rho != 2 {
		t.Errorf("p95 %v p99 %v, want 2", s.P95Rho, s.P99Rho)
	}
}

func TestSweepLabel(t *testing.T) {
	for _, tc := range []struct{ label, policy, setting, seed string }{
		{"themis", "themis", "", ""},
		{"las[sim.realloc=10m]", "las[sim.realloc=10m]", "", ""},
		{"las[sim.realloc=10m,workload.arrival_scale=0.5,workload.seed=2]", "las[sim.realloc=10m]", "workload.arrival_scale=0.5", "2"},
		{"themis[workload.seed=3]", "themis", "", "3"},
	} {
		p, s, seed := sweepLabel(tc.label)
		if p != tc.policy || s != tc.setting || seed != tc.seed {
			t.Errorf("%s: %q %q %q, want %q %q %q", tc.label, p, s, seed, tc.policy, tc.setting, tc.seed)
		}
	}
	if m := median([]float64{3, math.NaN(), 1, 2, 10}); m != 2.5 {
		t.Errorf("median %v, want 2.5 (NaN ignored)", m)
	}
}
