package workload

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/trace"
)

// naiveFIFOLoads replays jobs (sorted by Submit) on c by strict FIFO,
// recomputing everything from scratch at every event, and returns the FIFO
// load right after each event time up to the last submission, its time
// average over the arrival window, and where and when each job started (if
// by then): an independent check of fifo and fifoArrivals.
func naiveFIFOLoads(jobs []trace.Job, c Cluster) (loads []float64, avg float64, starts []start) {
	type run struct {
		job    int
		node   int
		finish float64
	}
	var running []run
	var queue []int
	next := 0
	finished := make([]bool, len(jobs))
	total := c.total()
	load := func() float64 {
		var sum resources
		for i := 0; i < next; i++ {
			if !finished[i] {
				d := demandOf(jobs[i])
				for k := range sum {
					sum[k] += d[k]
				}
			}
		}
		return total.share(sum)
	}
	end := jobs[len(jobs)-1].Submit
	prev, area := jobs[0].Submit, 0.0
	for next < len(jobs) {
		t := jobs[next].Submit
		for _, r := range running {
			t = min(t, r.finish)
		}
		area += load() * (t - prev)
		prev = t
		running = slices.DeleteFunc(running, func(r run) bool {
			if r.finish == t {
				finished[r.job] = true
			}
			return r.finish == t
		})
		for next < len(jobs) && jobs[next].Submit == t {
			queue = append(queue, next)
			next++
		}
		for len(queue) > 0 {
			d := demandOf(jobs[queue[0]])
			node, nodeGPUs := -1, 0.0 // best fit: fewest free GPUs, then lowest number
			for n := 0; n < c.Nodes; n++ {
				free := c.Node.capacity()
				for _, r := range running {
					if r.node == n {
						u := demandOf(jobs[r.job])
						for k := range free {
							free[k] -= u[k]
						}
					}
				}
				if free.fits(d) && (node < 0 || free[2] < nodeGPUs) {
					node, nodeGPUs = n, free[2]
				}
			}
			if node < 0 {
				break
			}
			running = append(running, run{queue[0], node, t + jobs[queue[0]].Duration})
			starts = append(starts, start{node, t})
			queue = queue[1:]
		}
		loads = append(loads, load())
	}
	if end == jobs[0].Submit {
		return loads, load(), starts
	}
	return loads, area / (end - jobs[0].Submit), starts
}

type start struct {
	node int
	at   float64
}

func TestFIFOAgainstNaive(t *testing.T) {
	for _, nodes := range []int{3, 6} {
		small := Cluster{Nodes: nodes, Node: Node{CPUs: 32, MemoryGB: 256, GPUs: 8}}
		for _, load := range []float64{0.5, 2, 3} {
			for _, arrivals := range []string{ArrivalsFIFO, ArrivalsPoisson} {
				cfg := config(1500, 11, arrivals)
				cfg.Cluster, cfg.Load = small, load
				tr := mustFitGpp(t, cfg)
				loads, avg, want := naiveFIFOLoads(tr.Jobs, small)
				if arrivals == ArrivalsFIFO {
					// After the last event the jobs ran out: it may stay
					// below the target.
					maxShare := 1 / float64(small.Nodes)
					for i, l := range loads[:len(loads)-1] {
						if l < load || l >= load+maxShare {
							t.Fatalf("%d nodes, load %g: after event %d the FIFO load is %g, want in [%g, %g)", nodes, load, i, l, load, load+maxShare)
						}
					}
				}
				var starts []start
				got, _ := replayFIFO(tr.Jobs, small, func(node int, at float64) { starts = append(starts, start{node, at}) })
				if !slices.Equal(starts[:len(want)], want) {
					t.Errorf("%d nodes, load %g, %s: replayFIFO starts jobs elsewhere or at other times than the naive replay", nodes, load, arrivals)
				}
				if math.Abs(got-avg) > 1e-9*avg {
					t.Errorf("%d nodes, load %g, %s: replayFIFO's average load %.12g, the naive replay's %.12g", nodes, load, arrivals, got, avg)
				}
			}
		}
	}
}

func TestDescribeByHand(t *testing.T) {
	// One node of 4 CPUs, 16 GB, 2 GPUs. a runs [0, 10); b (2 GPUs) waits
	// for it and runs [10, 30); c arrives at 20 and waits behind b.
	c := Cluster{Nodes: 1, Node: Node{CPUs: 4, MemoryGB: 16, GPUs: 2}}
	tr := &trace.Trace{Name: "hand", Jobs: []trace.Job{
		{ID: "a", Submit: 0, Duration: 10, GPUs: 1, CPUs: 2, MemoryGB: 4, Class: "te", GracePeriod: 60},
		{ID: "b", Submit: 5, Duration: 20, GPUs: 2, CPUs: 1, MemoryGB: 8, Class: "be", GracePeriod: 120},
		{ID: "c", Submit: 20, Duration: 40, GPUs: 1, CPUs: 4, MemoryGB: 16, Class: "be", GracePeriod: 0},
	}}
	s, err := Describe(tr, c)
	if err != nil {
		t.Fatal(err)
	}
	// Offered over the window of 20 s: CPUs (2·10 + 1·20 + 4·40)/(4·20)
	// = 2.5, memory (40 + 160 + 640)/(16·20) = 2.625, GPUs
	// (10 + 40 + 40)/(2·20) = 2.25.
	want := Resources{CPUs: 2.5, MemoryGB: 2.625, GPUs: 2.25}
	if s.Span != 20 || s.Offered != want || s.OfferedLoad != 2.625 {
		t.Errorf("span %g, offered %+v (max %g); want 20, %+v (max 2.625)", s.Span, s.Offered, s.OfferedLoad, want)
	}
	// FIFO load: [0,5) a alone: max(2/4, 4/16, 1/2) = 0.5; [5,10) a+b:
	// max(3/4, 12/16, 3/2) = 1.5; [10,20) b: max(1/4, 8/16, 2/2) = 1.
	// Average (0.5·5 + 1.5·5 + 1·10)/20 = 1. Utilization: 0.5, 0.5, 1:
	// (2.5 + 2.5 + 10)/20 = 0.75.
	within(t, "FIFO load", s.FIFOLoad, 1, 1e-12)
	within(t, "FIFO utilization", s.FIFOUtilization, 0.75, 1e-12)
	if len(s.Classes) != 2 || s.Classes[0].Class != "te" || s.Classes[1].Class != "be" {
		t.Fatalf("classes %+v", s.Classes)
	}
	be := s.Classes[1]
	if be.Jobs != 2 || be.MeanDuration != 30 || be.MeanGPUs != 1.5 || be.MeanCPUs != 2.5 || be.MeanMemoryGB != 12 || be.MeanGracePeriod != 60 {
		t.Errorf("BE stats %+v", be)
	}
	// BE memory: (160 + 640)/(16·20) = 2.5.
	within(t, "BE offered load", be.OfferedLoad, 2.5, 1e-12)
	within(t, "TE fraction", s.Classes[0].Fraction, 1.0/3, 1e-12)
	if s.All.Jobs != 3 || s.All.Class != "all" || s.All.OfferedLoad != s.OfferedLoad {
		t.Errorf("all: %+v", s.All)
	}
	out := s.String()
	for _, w := range []string{"hand: 3 jobs", "FIFO load 1.000", "offered load 2.625", " te ", " be ", " all "} {
		if !strings.Contains(out, w) {
			t.Errorf("String() lacks %q:\n%s", w, out)
		}
	}
}

func TestDescribeUnsortedAndUnclassified(t *testing.T) {
	c := Cluster{Nodes: 2, Node: Node{CPUs: 4, MemoryGB: 16, GPUs: 2}}
	jobs := []trace.Job{
		{ID: "late", Submit: 10, Duration: 5, GPUs: 1},
		{ID: "early", Submit: 0, Duration: 5, GPUs: 2},
	}
	s, err := Describe(&trace.Trace{Jobs: jobs}, c)
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0].ID != "late" {
		t.Error("Describe reordered the caller's jobs")
	}
	if len(s.Classes) != 1 || s.Classes[0].Class != "" || !strings.Contains(s.String(), "unspecified") {
		t.Errorf("classes %+v", s.Classes)
	}
	// GPUs (2·5 + 1·5)/(4·10) = 0.375; FIFO: [0,5) 2 GPUs of 4, [5,10) none.
	within(t, "offered load", s.OfferedLoad, 0.375, 1e-12)
	within(t, "FIFO load", s.FIFOLoad, 0.25, 1e-12)
}

func TestDescribeInvalid(t *testing.T) {
	c := Cluster{Nodes: 2, Node: Node{CPUs: 4, MemoryGB: 16, GPUs: 2}}
	cases := []struct {
		name string
		t    *trace.Trace
		c    Cluster
		want string
	}{
		{"nil", nil, c, "no jobs"},
		{"empty", &trace.Trace{}, c, "no jobs"},
		{"too big", &trace.Trace{Jobs: []trace.Job{{ID: "x", GPUs: 4}}}, c, "job x requests"},
		{"bad cluster", &trace.Trace{Jobs: []trace.Job{{ID: "x", GPUs: 1}}}, Cluster{}, "0 nodes"},
	}
	for _, tc := range cases {
		if _, err := Describe(tc.t, tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
