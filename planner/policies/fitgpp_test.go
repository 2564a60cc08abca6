package policies

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// fgNode is a node of gpus GPUs, 32 CPUs and 256 GB.
func fgNode(name string, gpus int) core.Node {
	n := core.Node{ID: name, Name: name, Schedulable: true, CPU: 32, Memory: 256}
	for i := 0; i < gpus; i++ {
		n.GPUs = append(n.GPUs, core.GPU{ID: fmt.Sprintf("%s-%d", name, i), Index: i, Healthy: true})
	}
	return n
}

// fgJob is a job of class, GPUs, CPUs and memory, grace period gp,
// submitted at sub.
func fgJob(id, class string, gpus int, cpu, mem, gp float64, sub int) core.Job {
	return core.Job{Key: core.JobKey{Namespace: "default", ID: id}, Class: class, GPUs: gpus, CPU: cpu, Memory: mem, GracePeriod: gp,
		Submitted: time.Unix(int64(sub), 0), Phase: core.Queued, Remaining: -1}
}

// running marks j granted the first gpus GPUs from index from of node.
func running(j core.Job, node core.Node, from int) (core.Job, core.Grant) {
	j.Phase = core.Granted
	g := core.Grant{Job: j.Key, Node: node.ID}
	for i := from; i < from+j.GPUs; i++ {
		g.GPUs = append(g.GPUs, node.GPUs[i].ID)
	}
	return j, g
}

// TestFitGppVictims checks Equation 2's choice on hand-built clusters:
// which BE job is preempted for a TE job that does not fit, the tie-break,
// the preemption limit P, and a TE job no single preemption can fit.
func TestFitGppVictims(t *testing.T) {
	a, b := fgNode("a", 8), fgNode("b", 8)
	type run struct {
		job  core.Job
		node core.Node
		from int
	}
	cases := []struct {
		name     string
		nodes    []core.Node // default a and b
		settings []string
		running  []run
		queued   []core.Job
		// want is the preempted jobs, then the granted ones.
		preempted, granted []string
	}{
		{
			// Score = |D|/max|D| + s GP/max GP. big: D = (4/8) on a, GP 60;
			// slow: D = (2/8) on b, GP 600. With s = 4: big 1 + 0.4, slow
			// 0.5 + 4: big goes. Both nodes are full otherwise.
			name: "s=4 prefers the short grace period",
			running: []run{
				{fgJob("big", "be", 4, 0, 0, 60, 1), a, 0}, {fgJob("fill-a", "be", 4, 0, 0, 60, 2), a, 4},
				{fgJob("slow", "be", 2, 0, 0, 600, 3), b, 0}, {fgJob("fill-b", "be", 6, 0, 0, 600, 4), b, 2},
			},
			queued:    []core.Job{fgJob("te", "te", 2, 0, 0, 0, 10)},
			preempted: []string{"big"}, granted: []string{"te"},
		},
		{
			// With s = 0 only the demand counts: slow (0.25 / 0.75) beats
			// big (0.5 / 0.75) and the fillers (0.5, 0.75).
			name:     "s=0 prefers the small demand",
			settings: []string{"fitgpp.s=0"},
			running: []run{
				{fgJob("big", "be", 4, 0, 0, 60, 1), a, 0}, {fgJob("fill-a", "be", 4, 0, 0, 60, 2), a, 4},
				{fgJob("slow", "be", 2, 0, 0, 600, 3), b, 0}, {fgJob("fill-b", "be", 6, 0, 0, 600, 4), b, 2},
			},
			queued:    []core.Job{fgJob("te", "te", 2, 0, 0, 0, 10)},
			preempted: []string{"slow"}, granted: []string{"te"},
		},
		{
			name:  "ties go to the first job in FIFO order",
			nodes: []core.Node{a},
			running: []run{
				{fgJob("first", "be", 4, 0, 0, 60, 1), a, 0}, {fgJob("second", "be", 4, 0, 0, 60, 2), a, 4},
			},
			queued:    []core.Job{fgJob("te", "te", 1, 0, 0, 0, 10)},
			preempted: []string{"first"}, granted: []string{"te"},
		},
		{
			name:  "a job preempted P times is spared",
			nodes: []core.Node{a},
			running: []run{
				{func() core.Job { j := fgJob("first", "be", 4, 0, 0, 60, 1); j.Preemptions = 1; return j }(), a, 0},
				{fgJob("second", "be", 4, 0, 0, 60, 2), a, 4},
			},
			queued:    []core.Job{fgJob("te", "te", 1, 0, 0, 0, 10)},
			preempted: []string{"second"}, granted: []string{"te"},
		},
		{
			name:     "P = 2 allows a second preemption",
			nodes:    []core.Node{a},
			settings: []string{"fitgpp.max_preemptions=2"},
			running: []run{
				{func() core.Job { j := fgJob("first", "be", 4, 0, 0, 60, 1); j.Preemptions = 1; return j }(), a, 0},
				{fgJob("second", "be", 4, 0, 0, 600, 2), a, 4},
			},
			queued:    []core.Job{fgJob("te", "te", 1, 0, 0, 0, 10)},
			preempted: []string{"first"}, granted: []string{"te"},
		},
		{
			// Two 4-GPU jobs per node: no single preemption frees 8 GPUs
			// on one node, so FitGpp preempts nothing; the TE job heads the
			// queue and blocks the BE job behind it.
			name: "no single preemption fits: nothing is preempted",
			running: []run{
				{fgJob("a1", "be", 4, 0, 0, 60, 1), a, 0}, {fgJob("a2", "be", 4, 0, 0, 60, 2), a, 4},
				{fgJob("b1", "be", 4, 0, 0, 60, 3), b, 0}, {fgJob("b2", "be", 3, 0, 0, 60, 4), b, 4},
			},
			queued: []core.Job{fgJob("te", "te", 8, 0, 0, 0, 10), fgJob("be", "be", 1, 0, 0, 0, 5)},
		},
		{
			name: "TE jobs are never victims",
			running: []run{
				{fgJob("te-old", "te", 8, 0, 0, 60, 1), a, 0},
				{fgJob("be-b", "be", 8, 0, 0, 60, 2), b, 0},
			},
			queued:    []core.Job{fgJob("te", "te", 2, 0, 0, 0, 10)},
			preempted: []string{"be-b"}, granted: []string{"te"},
		},
		{
			// a has free GPUs but no CPU left, b neither. Either job's
			// preemption fits the TE job; cpu-hog's demand (1/4, 1, 10/256)
			// is smaller than gpu-hog's (1, 30/32, 10/256), so it goes.
			name: "CPU is a resource too",
			running: []run{
				{fgJob("cpu-hog", "be", 2, 32, 10, 60, 1), a, 0},
				{fgJob("gpu-hog", "be", 8, 30, 10, 60, 2), b, 0},
			},
			queued:    []core.Job{fgJob("te", "te", 1, 4, 10, 0, 10)},
			preempted: []string{"cpu-hog"}, granted: []string{"te"},
		},
		{
			name:      "a TE job that fits is placed without preemption",
			running:   []run{{fgJob("a1", "be", 4, 0, 0, 60, 1), a, 0}, {fgJob("b1", "be", 8, 0, 0, 60, 2), b, 0}},
			queued:    []core.Job{fgJob("be-wait", "be", 8, 0, 0, 0, 5), fgJob("te", "te", 4, 0, 0, 0, 10)},
			preempted: nil, granted: []string{"te"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var jobs []core.Job
			var grants []core.Grant
			for _, r := range tc.running {
				j, g := running(r.job, r.node, r.from)
				jobs, grants = append(jobs, j), append(grants, g)
			}
			jobs = append(jobs, tc.queued...)
			nodes := tc.nodes
			if nodes == nil {
				nodes = []core.Node{a, b}
			}
			o := decideOnce(t, policy(t, "fitgpp", tc.settings...), nodes, jobs, grants)
			if !slices.Equal(o.preempted, tc.preempted) || !slices.Equal(o.granted, tc.granted) {
				t.Errorf("preempted %v granted %v, want %v and %v", o.preempted, o.granted, tc.preempted, tc.granted)
			}
		})
	}
}

// TestLRTPPreemptsUntilItFits: LRTP takes the longest remaining BE jobs,
// whether or not they help, until the TE job fits; RAND takes random ones.
func TestLRTPPreemptsUntilItFits(t *testing.T) {
	a, b := fgNode("a", 8), fgNode("b", 8)
	mk := func(id string, gpus int, rem float64, sub int) core.Job {
		j := fgJob(id, "be", gpus, 0, 0, 60, sub)
		j.Remaining = rem
		return j
	}
	var jobs []core.Job
	var grants []core.Grant
	for _, r := range []struct {
		j    core.Job
		n    core.Node
		from int
	}{
		{mk("a-long", 4, 900, 1), a, 0}, {mk("a-short", 4, 10, 2), a, 4},
		{mk("b-longest", 4, 1000, 3), b, 0}, {mk("b-short", 4, 20, 4), b, 4},
	} {
		j, g := running(r.j, r.n, r.from)
		jobs, grants = append(jobs, j), append(grants, g)
	}
	// The TE job needs 8 GPUs: b-longest (b: 4 free) then a-long (a: 4
	// free) do not fit it; b-short does (b: 8 free).
	jobs = append(jobs, fgJob("te", "te", 8, 0, 0, 0, 10))
	o := decideOnce(t, policy(t, "lrtp"), []core.Node{a, b}, jobs, grants)
	if want := []string{"b-longest", "a-long", "b-short"}; !slices.Equal(o.preempted, want) || !slices.Equal(o.granted, []string{"te"}) {
		t.Errorf("lrtp preempted %v granted %v, want %v and [te]", o.preempted, o.granted, want)
	}
	// FitGpp finds no single job whose preemption fits 8 GPUs.
	if o := decideOnce(t, policy(t, "fitgpp"), []core.Node{a, b}, jobs, grants); len(o.preempted)+len(o.granted) != 0 {
		t.Errorf("fitgpp preempted %v granted %v, want nothing", o.preempted, o.granted)
	}
	o = decideOnce(t, policy(t, "rand"), []core.Node{a, b}, jobs, grants)
	if len(o.preempted) < 2 || !slices.Equal(o.granted, []string{"te"}) {
		t.Errorf("rand preempted %v granted %v, want at least two victims and te", o.preempted, o.granted)
	}
}

// TestFitGppQueueOrder: TE jobs first, then preempted BE jobs (back at the
// head of the queue), then the others, each in FIFO order.
func TestFitGppQueueOrder(t *testing.T) {
	pre := fgJob("preempted", "be", 1, 0, 0, 0, 5)
	pre.Preemptions = 1
	jobs := []*core.Job{
		ptr(fgJob("be-early", "be", 1, 0, 0, 0, 1)), ptr(pre), ptr(fgJob("te-late", "te", 1, 0, 0, 0, 9)),
		ptr(fgJob("te-early", "te", 1, 0, 0, 0, 3)), ptr(fgJob("be-late", "be", 1, 0, 0, 0, 7)),
	}
	policy(t, "fitgpp").Rank(time.Unix(10, 0), jobs)
	var got []string
	for _, j := range jobs {
		got = append(got, j.Key.ID)
	}
	if want := []string{"te-early", "te-late", "preempted", "be-early", "be-late"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func ptr(j core.Job) *core.Job { return &j }

// TestFitGppProperties drives random rounds and checks, after each, that
// no BE job is preempted more than P times and that no TE job is left
// waiting while a running BE job below its limit could have been preempted
// to fit it (Equation 2's promise), and that no GPU, CPU or memory is
// oversubscribed.
func TestFitGppProperties(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewSource(seed))
		p := 1 + rng.Intn(2)
		pol := policy(t, "fitgpp", fmt.Sprintf("fitgpp.max_preemptions=%d", p), fmt.Sprintf("fitgpp.s=%d", rng.Intn(5)))
		var nodes []core.Node
		for i := 0; i < 1+rng.Intn(4); i++ {
			nodes = append(nodes, fgNode(fmt.Sprintf("n%d", i), []int{2, 4, 8}[rng.Intn(3)]))
		}
		jobs := map[core.JobKey]*core.Job{}
		grants := map[core.JobKey]core.Grant{}
		var order []core.JobKey
		for round := 0; round < 30; round++ {
			// Arrivals.
			for k := rng.Intn(3); k > 0; k-- {
				class := "be"
				if rng.Intn(3) == 0 {
					class = "te"
				}
				id := fmt.Sprintf("j%d", len(order))
				j := fgJob(id, class, 1+rng.Intn(4), float64(1+rng.Intn(16)), float64(1+rng.Intn(128)), float64(rng.Intn(600)), len(order))
				jobs[j.Key] = &j
				order = append(order, j.Key)
			}
			// Completions.
			for _, key := range order {
				if j := jobs[key]; j.Phase == core.Granted && rng.Intn(6) == 0 {
					j.Phase = core.Finished
					delete(grants, key)
				}
			}
			st := core.State{Nodes: nodes}
			for _, key := range order {
				st.Jobs = append(st.Jobs, *jobs[key])
				if g, ok := grants[key]; ok {
					st.Grants = append(st.Grants, g)
				}
			}
			d := core.Scheduler{Policy: pol}.Decide(st, time.Unix(int64(round), 0))
			preempted := map[core.JobKey]bool{}
			for _, a := range d.Actions {
				switch a := a.(type) {
				case core.PreemptAction:
					j := jobs[a.Grant.Job]
					j.Phase, j.Preemptions = core.Queued, j.Preemptions+1
					delete(grants, a.Grant.Job)
					preempted[a.Grant.Job] = true
					if j.Class != core.ClassBestEffort || j.Preemptions > p {
						t.Fatalf("seed %d round %d: preempted %s (class %s) a %d-th time, P = %d", seed, round, j.Key, j.Class, j.Preemptions, p)
					}
				case core.GrantAction:
					jobs[a.Grant.Job].Phase = core.Granted
					grants[a.Grant.Job] = a.Grant
				}
			}
			// Free resources per node after the round.
			type res struct{ gpus, cpu, mem float64 }
			free := map[string]*res{}
			gpuOf := map[string]string{}
			for _, n := range nodes {
				free[n.ID] = &res{float64(len(n.GPUs)), n.CPU, n.Memory}
				for _, g := range n.GPUs {
					gpuOf[g.ID] = n.ID
				}
			}
			held := map[string]bool{}
			for key, g := range grants {
				j := jobs[key]
				for _, id := range g.GPUs {
					if held[id] {
						t.Fatalf("seed %d round %d: GPU %s granted twice", seed, round, id)
					}
					held[id] = true
				}
				f := free[g.Node]
				f.gpus -= float64(len(g.GPUs))
				f.cpu -= j.CPU
				f.mem -= j.Memory
				if f.gpus < 0 || f.cpu < -1e-9 || f.mem < -1e-9 {
					t.Fatalf("seed %d round %d: node %s oversubscribed: %+v", seed, round, g.Node, *f)
				}
			}
			for _, key := range order {
				te := jobs[key]
				if te.Class != core.ClassTrialAndError || te.Phase != core.Queued {
					continue
				}
				for vk, g := range grants {
					v := jobs[vk]
					if v.Class != core.ClassBestEffort || v.Preemptions >= p {
						continue
					}
					f := free[g.Node]
					if f.gpus+float64(v.GPUs) >= float64(te.GPUs) && f.cpu+v.CPU >= te.CPU && f.mem+v.Memory >= te.Memory {
						t.Logf("state: nodes %d", len(nodes))
						for _, k := range order {
							t.Logf("  %+v grant=%v", *jobs[k], grants[k])
						}
						t.Logf("free %+v d=%v", *f, d.Actions)
						t.Fatalf("seed %d round %d: TE job %s waits although preempting %s on %s would fit it", seed, round, te.Key, vk, g.Node)
					}
				}
			}
		}
	}
}
