package sim

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

func fifoPolicy() (core.Policy, error) { return policies.FIFO{}, nil }

func vcJob(id, vc string, submit, duration float64, gpus int) trace.Job {
	return trace.Job{ID: id, VC: vc, Submit: submit, Duration: duration, GPUs: gpus, Model: "resnet50"}
}

// TestVCModesAnomaly is the HiveD paper's sharing anomaly in miniature:
// two VCs own one 8-GPU node each. Under GPU quotas, b's two 4-GPU jobs end
// up on both nodes, so a's 8-GPU job waits for b although a uses none of
// its 8 GPUs; in a's private node it starts at once. Under HiveD b's jobs
// stay in b's cell and a waits exactly as long as in private.
func TestVCModesAnomaly(t *testing.T) {
	tr := &trace.Trace{Name: "anomaly", Jobs: []trace.Job{
		vcJob("b1", "b", 0, 1000, 4),
		vcJob("a1", "a", 1, 4, 4), // fills node 0 beside b1, ends at 5
		vcJob("b2", "b", 2, 1000, 4),
		vcJob("a2", "a", 6, 10, 8),
	}}
	cl, err := cluster.Uniform("two", 1, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	vcs := &hived.Config{VCs: []hived.VCConfig{
		{Name: "a", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
		{Name: "b", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
	}}
	results := map[stack.Placement]*Result{}
	for _, mode := range []stack.Placement{stack.PlaceQuota, stack.PlaceHived} {
		r, err := RunVCs(VCRun{Config: Config{Trace: tr, Cluster: cl}, NewPolicy: fifoPolicy, VCs: vcs, Mode: mode})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		results[mode] = r
	}
	q, h := results[stack.PlaceQuota], results[stack.PlaceHived]
	if q.SharingAnomalies != 1 || !q.VCs[0].Anomaly || q.VCs[0].Name != "a" {
		t.Errorf("quota: %d anomalies, VCs %+v; want a alone", q.SharingAnomalies, q.VCs)
	}
	if h.SharingAnomalies != 0 || h.MaxExcessQueue > AnomalyTolerance {
		t.Errorf("hived: %d anomalies (max excess %g s), VCs %+v; want none", h.SharingAnomalies, h.MaxExcessQueue, h.VCs)
	}
	// a2 waits 0 s in private and under HiveD; under quotas until b1 ends
	// and frees node 0 (t = 1000).
	for mode, want := range map[stack.Placement]float64{stack.PlaceHived: 0, stack.PlaceQuota: 1000 - 6} {
		for _, j := range results[mode].Jobs {
			if j.ID == "a2" && math.Abs(j.Queue-want) > 1e-6 {
				t.Errorf("%s: a2 queued %g s, want %g", mode, j.Queue, want)
			}
		}
	}
}

// TestVCHivedNoAnomalies is sharing safety end to end: random clusters,
// VCs and traces, and HiveD mode never makes a VC wait longer on average
// than its private cluster does. The same cases under GPU quotas do show
// anomalies, so the check can tell the two apart.
func TestVCHivedNoAnomalies(t *testing.T) {
	quotaAnomalies := 0
	for seed := int64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		cl, err := cluster.Uniform("c", 1+rng.Intn(2), 2+rng.Intn(3), []int{4, 8}[rng.Intn(2)])
		if err != nil {
			t.Fatal(err)
		}
		per := len(cl.Nodes[0].GPUs)
		nvc := 1 + rng.Intn(3)
		cells := len(cl.Nodes)
		cfg := &hived.Config{}
		for v := 0; v < nvc && cells > 0; v++ {
			n := 1 + rng.Intn(cells)
			if v == nvc-1 {
				n = cells
			}
			cells -= n
			cfg.VCs = append(cfg.VCs, hived.VCConfig{Name: fmt.Sprintf("vc%d", v), Cells: []hived.CellCount{{Type: fmt.Sprintf("node%d", per), Count: n}}})
		}
		tr := &trace.Trace{Name: fmt.Sprintf("random-%d", seed)}
		at := 0.0
		for i := 0; i < 60; i++ {
			at += rng.ExpFloat64() * 50
			v := cfg.VCs[rng.Intn(len(cfg.VCs))]
			tr.Jobs = append(tr.Jobs, vcJob(fmt.Sprintf("j%d", i), v.Name, at, 10+rng.ExpFloat64()*300, 1<<rng.Intn(4)))
		}
		r, err := RunVCs(VCRun{Config: Config{Trace: tr, Cluster: cl, Seed: seed}, NewPolicy: fifoPolicy, VCs: cfg, Mode: stack.PlaceHived})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if r.SharingAnomalies != 0 {
			t.Fatalf("seed %d: %d sharing anomalies under HiveD: %+v", seed, r.SharingAnomalies, r.VCs)
		}
		o, err := RunVCs(VCRun{Config: Config{Trace: tr, Cluster: cl, Seed: seed}, NewPolicy: fifoPolicy, VCs: cfg, Mode: stack.PlaceHivedOverflow})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if o.SharingAnomalies != 0 {
			t.Fatalf("seed %d: %d sharing anomalies under HiveD with overflow: %+v", seed, o.SharingAnomalies, o.VCs)
		}
		q, err := RunVCs(VCRun{Config: Config{Trace: tr, Cluster: cl, Seed: seed}, NewPolicy: fifoPolicy, VCs: cfg, Mode: stack.PlaceQuota})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		quotaAnomalies += q.SharingAnomalies
	}
	if quotaAnomalies == 0 {
		t.Error("no sharing anomaly under GPU quotas in any case: the cases do not exercise sharing")
	}
	t.Logf("%d sharing anomalies under quotas", quotaAnomalies)
}

// TestVCOverflowPreempted: a owns node 0 and b node 1. a's second 8-GPU
// job overflows onto b's idle node as opportunistic, and is preempted (once)
// when b's job arrives, which starts once a2 has checkpointed (10 s); a2
// still finishes long before it would in a's private node (after a1, at
// 2000).
func TestVCOverflowPreempted(t *testing.T) {
	tr := &trace.Trace{Name: "overflow", Jobs: []trace.Job{
		vcJob("a1", "a", 0, 1000, 8),
		vcJob("a2", "a", 1, 1000, 8),
		vcJob("b1", "b", 100, 10, 8),
	}}
	cl, err := cluster.Uniform("two", 1, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	vcs := &hived.Config{VCs: []hived.VCConfig{
		{Name: "a", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
		{Name: "b", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
	}}
	r, err := RunVCs(VCRun{Config: Config{Trace: tr, Cluster: cl, CheckpointCost: 10, RestoreCost: 20}, NewPolicy: fifoPolicy, VCs: vcs, Mode: stack.PlaceHivedOverflow})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]JobResult{}
	for _, j := range r.Jobs {
		byID[j.ID] = j
	}
	a2, b1 := byID["a2"], byID["b1"]
	if a2.Preemptions != 1 || a2.Start != 1 || !a2.Finished || a2.End >= 1100 {
		t.Errorf("a2 %+v: want started at 1 opportunistically, preempted once, finished by 1100 (private: 2000)", a2)
	}
	if b1.Preemptions != 0 || b1.Queue > 10+1e-9 {
		t.Errorf("b1 %+v: want started at arrival, after at most a2's checkpoint (10 s)", b1)
	}
	if r.VCs[0].Preemptions != 1 || r.VCs[1].Preemptions != 0 {
		t.Errorf("VC preemptions %+v, want a 1, b 0", r.VCs)
	}
}

func TestRunVCsErrors(t *testing.T) {
	cl, _ := cluster.Uniform("two", 1, 2, 8)
	vcs := &hived.Config{VCs: []hived.VCConfig{{Name: "a", Cells: []hived.CellCount{{Type: "node8", Count: 1}}}}}
	tr := &trace.Trace{Name: "t", Jobs: []trace.Job{vcJob("x", "zz", 0, 1, 1)}}
	for _, tc := range []struct {
		name string
		run  VCRun
	}{
		{"unknown mode", VCRun{Config: Config{Trace: tr, Cluster: cl}, NewPolicy: fifoPolicy, VCs: vcs, Mode: "fair"}},
		{"job of an unknown VC", VCRun{Config: Config{Trace: tr, Cluster: cl}, NewPolicy: fifoPolicy, VCs: vcs, Mode: stack.PlaceHived}},
	} {
		if _, err := RunVCs(tc.run); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestPhillyVCsExample: the shipped VC config fits the philly preset and
// names every virtual cluster of philly.csv.
func TestPhillyVCsExample(t *testing.T) {
	src, err := os.ReadFile("../../examples/philly-vcs.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := hived.ParseConfig("philly-vcs.hcl", src)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Preset("philly")
	if err != nil {
		t.Fatal(err)
	}
	c, err := hived.New(cl.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, v := range c.VCs() {
		known[v.Name] = true
	}
	tr := sharedTrace(t, "philly.csv")
	for _, j := range tr.Jobs {
		if !known[j.VC] {
			t.Fatalf("philly.csv job %s is in VC %q, which examples/philly-vcs.hcl lacks", j.ID, j.VC)
		}
	}
}

// TestVCJobTooLarge: a job larger than its VC's cells (or quota) never
// runs, and does not hold up the jobs behind it.
func TestVCJobTooLarge(t *testing.T) {
	tr := &trace.Trace{Name: "large", Jobs: []trace.Job{
		vcJob("huge", "a", 0, 100, 16),
		vcJob("small", "a", 1, 10, 4),
	}}
	cl, _ := cluster.Uniform("two", 1, 2, 8)
	vcs := &hived.Config{VCs: []hived.VCConfig{{Name: "a", Cells: []hived.CellCount{{Type: "node8", Count: 1}}}}}
	for _, mode := range []stack.Placement{stack.PlaceHived, stack.PlaceQuota} {
		r, err := RunVCs(VCRun{Config: Config{Trace: tr, Cluster: cl}, NewPolicy: fifoPolicy, VCs: vcs, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range r.Jobs {
			switch {
			case j.ID == "huge" && j.Started:
				t.Errorf("%s: the 16-GPU job ran in an 8-GPU VC", mode)
			case j.ID == "small" && (!j.Finished || j.Queue != 0):
				t.Errorf("%s: small job finished %v after queueing %g s, want at once", mode, j.Finished, j.Queue)
			}
		}
	}
}

// TestHivedPlacerPreemptsOpportunistic: a guaranteed job whose VC's cell is
// lent to an opportunistic job gets it back in one round: the core preempts
// the opportunistic job and grants its GPUs.
func TestHivedPlacerPreemptsOpportunistic(t *testing.T) {
	cl, _ := cluster.Uniform("one", 1, 1, 8)
	c, err := hived.New(cl.Nodes, &hived.Config{VCs: []hived.VCConfig{
		{Name: "a", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
		{Name: "b"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	opp := core.JobKey{Namespace: "sim", ID: "opp"}
	a, err := c.Allocate(hived.Request{Job: opp, VC: "b", GPUs: 8, Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []core.Job{
		{Key: opp, VC: "b", GPUs: 8, Priority: -1, Phase: core.Granted},
		{Key: core.JobKey{Namespace: "sim", ID: "mine"}, VC: "a", GPUs: 4, Phase: core.Queued, Seq: 1},
	}
	p := core.Scheduler{Policy: policies.FIFO{}, Placer: &vcCounter{Placer: hived.NewPlacer(c), queued: map[string]int{"a": 1}, waiting: 1}}
	d := p.Decide(core.State{Nodes: cl.Nodes, Jobs: jobs, Grants: []core.Grant{a.Grant()}}, at(0))
	var got []string
	for _, act := range d.Actions {
		switch act := act.(type) {
		case core.PreemptAction:
			got = append(got, "preempt "+act.Grant.Job.ID)
		case core.GrantAction:
			got = append(got, fmt.Sprintf("grant %s %d", act.Grant.Job.ID, len(act.Grant.GPUs)))
		}
	}
	if want := []string{"preempt opp", "grant mine 4"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("actions %v, want %v", got, want)
	}
}

// TestRunVCsPerVCPolicies: a shared run whose two VCs run different
// policies. In "trial" (fitgpp) the trial-and-error job preempts the
// running best-effort job at once; in "research" (tiresias-las, one
// 100 GPU-second threshold) the second job preempts the first once it has
// left the first queue, and they take turns as Tiresias says. With fifo in
// both, nothing is preempted.
func TestRunVCsPerVCPolicies(t *testing.T) {
	cl, err := cluster.Uniform("two", 1, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	te := vcJob("te", "trial", 10, 100, 8)
	te.Class = core.ClassTrialAndError
	tr := &trace.Trace{Name: "two-policies", Jobs: []trace.Job{
		vcJob("be", "trial", 0, 1000, 8), te,
		vcJob("first", "research", 0, 1000, 8), vcJob("second", "research", 50, 1000, 8),
	}}
	vcs, err := hived.ParseConfig("vcs.hcl", []byte(`
vc "trial" {
  policy = "fitgpp"
  cells {
    type  = "node8"
    count = 1
  }
}
vc "research" {
  policy = "tiresias-las"
  knobs  = { "tiresias.queues" = "100" }
  cells {
    type  = "node8"
    count = 1
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		vcs      *hived.Config
		trialP   int // preemptions in the trial VC
		research bool
	}{
		{"per-VC policies", vcs, 1, true},
		{"fifo everywhere", &hived.Config{VCs: []hived.VCConfig{
			{Name: "trial", Cells: vcs.VCs[0].Cells}, {Name: "research", Cells: vcs.VCs[1].Cells}}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newPolicy := func() (core.Policy, error) {
				st, err := stack.Build("fifo", stack.Options{VCs: tc.vcs})
				if err != nil {
					return nil, err
				}
				return st.Policy, nil
			}
			r, err := RunVCs(VCRun{Config: Config{Trace: tr, Cluster: cl, CheckpointCost: 1, RestoreCost: 1}, NewPolicy: newPolicy, VCs: tc.vcs, Mode: stack.PlaceHived})
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]JobResult{}
			for _, j := range r.Jobs {
				byID[j.ID] = j
			}
			if got := byID["be"].Preemptions; got != tc.trialP {
				t.Errorf("be preempted %d times, want %d", got, tc.trialP)
			}
			if tc.trialP > 0 && byID["te"].Start > 12 {
				t.Errorf("te started at %g, want at once (10 s, plus be's checkpoint)", byID["te"].Start)
			}
			if p := byID["first"].Preemptions; (p > 0) != tc.research {
				t.Errorf("first preempted %d times, want preemptions: %v", p, tc.research)
			}
			if tc.research && byID["second"].Start > 60 {
				t.Errorf("second started at %g, want soon after its arrival at 50 (first left queue 0 at 12.5)", byID["second"].Start)
			}
			for _, j := range r.Jobs {
				if !j.Finished {
					t.Errorf("%s did not finish", j.ID)
				}
			}
		})
	}
}
