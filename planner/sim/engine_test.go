package sim

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/gittins"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/trace"
)

// Multi-round scenarios with JCTs worked out by hand. Checkpoint and restore
// costs are 0 unless a test is about them.

const tol = 1e-9

// mustCluster(t)(cluster.Uniform(...)) fails the test when a cluster
// cannot be built.
func mustCluster(t testing.TB) func(*cluster.Cluster, error) *cluster.Cluster {
	return func(c *cluster.Cluster, err error) *cluster.Cluster {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// rankingNames are the registry's policies but themis (tested on its
// own): those the generic scheduler runs.
func rankingNames() []string {
	return slices.DeleteFunc(stack.Names(), func(n string) bool { return n == arbiter.Name })
}

func newPolicy(t testing.TB, name string, settings ...string) core.Policy {
	t.Helper()
	k, err := core.ParseKnobs(settings)
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Build(name, stack.Options{Knobs: k})
	if err != nil {
		t.Fatal(err)
	}
	return st.Policy
}

func run(t testing.TB, cfg Config) *Result {
	t.Helper()
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func avgJCT(r *Result) float64 {
	s := 0.0
	for _, j := range r.Jobs {
		s += j.JCT()
	}
	return s / float64(len(r.Jobs))
}

func ends(r *Result) []float64 {
	out := make([]float64, len(r.Jobs))
	for i, j := range r.Jobs {
		out[i] = j.End
	}
	return out
}

func closeAll(got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol {
			return false
		}
	}
	return true
}

// figure7 is the Tiresias paper's Figure 7 example: three jobs arrive at once
// at one 2-GPU machine, as (GPUs, duration): J1 = (2, 2), J2 = (1, 8),
// J3 = (2, 6); their services are 4, 8 and 12 GPU-units.
func figure7(t *testing.T) (*trace.Trace, *cluster.Cluster) {
	tr := &trace.Trace{Name: "figure7", Jobs: []trace.Job{
		{ID: "J1", GPUs: 2, Duration: 2, Model: "resnet50"},
		{ID: "J2", GPUs: 1, Duration: 8, Model: "resnet50"},
		{ID: "J3", GPUs: 2, Duration: 6, Model: "resnet50"},
	}}
	return tr, mustCluster(t)(cluster.Uniform("one-2gpu", 1, 1, 2))
}

// TestTiresiasFigure7 replays Figure 7 under SRSF, 2D-LAS and 2D-Gittins.
//
// srsf (services 4 < 8 < 12): J1 0-2; J2 2-10 (J3 needs 2 GPUs, 1 is free);
// J3 10-16. JCTs 2, 10, 16: 28/3, the paper's 9.3.
//
// tiresias-las, one threshold at 4 GPU-units: J1 0-2 (finishes as it
// reaches 4); J2 2-6, demoted at 1 x 4; J3 (first queue) 6-8, demoted at
// 2 x 2, preempting J2; both in the last queue, where the running J3 ranks
// before the waiting J2: J3 8-12 (4 left), J2 12-16 (4 left). JCTs 2, 16,
// 12: 10, with one preemption. (By first start alone, tiresias.order=start,
// J2 took its GPUs back at 8: the same 10, with two.)
//
// tiresias-gittins with the distribution {4, 8, 12} and the same threshold:
// every job in the first queue has attained 0 when a choice is made, so the
// indexes tie and the order is 2D-LAS's: 10 (the paper's 2D-Gittins value).
//
// With the threshold at 2 GPU-units, tiresias-las: J1 0-1 (demoted, and
// preempted: the first queue comes first); J2 1-3 (demoted; J3 cannot fit
// beside it); J3 3-4 (demoted, still running); last queue, running first:
// J3 4-9, then J1 (started 0) 9-10 and J2 10-16. JCTs 10, 16, 9: 35/3.
// (By first start alone: J1 4-5, J2 5-11, J3 11-16, 32/3: here the old
// order happens to win, by letting the two short remainders go first.)
func TestTiresiasFigure7(t *testing.T) {
	tr, cl := figure7(t)
	gittinsWith := func(q string) core.Policy {
		p := newPolicy(t, "tiresias-gittins", "tiresias.queues="+q)
		d, err := gittins.New([]float64{4, 8, 12})
		if err != nil {
			t.Fatal(err)
		}
		p.(*policies.Tiresias).SetIndex(d)
		return p
	}
	cases := []struct {
		name        string
		pol         core.Policy
		ends        []float64
		preemptions int
	}{
		{"srsf", newPolicy(t, "srsf"), []float64{2, 10, 16}, 0},
		{"tiresias-las q=4", newPolicy(t, "tiresias-las", "tiresias.queues=4"), []float64{2, 16, 12}, 1},
		{"tiresias-gittins q=4", gittinsWith("4"), []float64{2, 16, 12}, 1},
		{"tiresias-las q=2", newPolicy(t, "tiresias-las", "tiresias.queues=2"), []float64{10, 16, 9}, 2},
		{"tiresias-gittins q=2", gittinsWith("2"), []float64{10, 16, 9}, 2},
		{"tiresias-las q=4 order=start", newPolicy(t, "tiresias-las", "tiresias.queues=4", "tiresias.order=start"), []float64{2, 12, 16}, 2},
		{"tiresias-las q=2 order=start", newPolicy(t, "tiresias-las", "tiresias.queues=2", "tiresias.order=start"), []float64{5, 11, 16}, 3},
		// las re-ranks only at arrivals and completions (it has no
		// RecheckAfter), so with simultaneous arrivals it runs FIFO.
		{"las", newPolicy(t, "las"), []float64{2, 10, 16}, 0},
		// srtf (times 2 < 6 < 8): J1 0-2, J3 2-8, J2 8-16.
		{"srtf", newPolicy(t, "srtf"), []float64{2, 16, 8}, 0},
	}
	avg := map[string]float64{}
	for _, c := range cases {
		r := run(t, Config{Trace: tr, Cluster: cl, Policy: c.pol})
		if !closeAll(ends(r), c.ends) || r.Preemptions != c.preemptions {
			t.Errorf("%s: ends %v with %d preemptions, want %v with %d", c.name, ends(r), r.Preemptions, c.ends, c.preemptions)
		}
		avg[c.name] = avgJCT(r)
	}
	if math.Abs(avg["srsf"]-28.0/3) > tol {
		t.Errorf("srsf average JCT %v, want 28/3 (the paper's 9.3)", avg["srsf"])
	}
	if math.Abs(avg["tiresias-las q=4"]-10) > tol || math.Abs(avg["tiresias-las q=2"]-35.0/3) > tol {
		t.Errorf("tiresias-las average JCT %v (q=4), %v (q=2), want 10 and 35/3", avg["tiresias-las q=4"], avg["tiresias-las q=2"])
	}
	// The paper's ordering: more information, lower average JCT.
	for _, q := range []string{"4", "2"} {
		s, g, l := avg["srsf"], avg["tiresias-gittins q="+q], avg["tiresias-las q="+q]
		if !(s <= g+tol && g <= l+tol) {
			t.Errorf("q=%s: want SRSF <= 2D-Gittins <= 2D-LAS, got %v, %v, %v", q, s, g, l)
		}
	}
}

// TestPreemptionCost: on one 8-GPU node under las, A (8 GPUs, 100 s) starts
// at 0; B (8 GPUs, 50 s) arrives at 40 with less attained service and
// preempts A; B ends at 90; A resumes at 90 and, after checkpoint + restore
// (10 + 20 s) without progress, runs its last 60 s: it ends at 180 instead
// of 150.
func TestPreemptionCost(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{
		{ID: "A", GPUs: 8, Duration: 100, Model: "resnet50"},
		{ID: "B", GPUs: 8, Duration: 50, Submit: 40, Model: "resnet50"},
	}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	for _, c := range []struct {
		checkpoint, restore float64
		endA                float64
	}{{0, 0, 150}, {10, 20, 180}, {0, 7.5, 157.5}} {
		r := run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, "las"), CheckpointCost: c.checkpoint, RestoreCost: c.restore})
		a, b := r.Jobs[0], r.Jobs[1]
		if math.Abs(a.End-c.endA) > tol || math.Abs(b.End-90) > tol {
			t.Errorf("costs %v+%v: A ends %v, B %v; want %v and 90", c.checkpoint, c.restore, a.End, b.End, c.endA)
		}
		if a.Preemptions != 1 || b.Preemptions != 0 || r.Preemptions != 1 {
			t.Errorf("costs %v+%v: preemptions A=%d B=%d total=%d, want 1, 0, 1", c.checkpoint, c.restore, a.Preemptions, b.Preemptions, r.Preemptions)
		}
		// A waited from 40 to 90: the restore is held time, not queueing.
		if math.Abs(a.Queue-50) > tol || a.Start != 0 {
			t.Errorf("costs %v+%v: A queued %v from start %v, want 50 from 0", c.checkpoint, c.restore, a.Queue, a.Start)
		}
	}
}

// TestPlacementSlowdown: a 16-GPU job on 8-GPU nodes spans two nodes and runs
// at 1/crossNode speed in one rack, 1/crossRack across racks (models.go);
// an 8-GPU job on one node runs at full speed.
func TestPlacementSlowdown(t *testing.T) {
	oneRack := mustCluster(t)(cluster.Uniform("r1n2g8", 1, 2, 8))
	twoRacks := mustCluster(t)(cluster.Uniform("r2n1g8", 2, 1, 8))
	cases := []struct {
		name  string
		cl    *cluster.Cluster
		model string
		gpus  int
		jct   float64
	}{
		{"vgg16 one node", oneRack, "vgg16", 8, 120},
		{"vgg16 two nodes one rack", oneRack, "vgg16", 16, 120 * 1.2},
		{"vgg16 two racks", twoRacks, "vgg16", 16, 120 * 1.6},
		{"resnet50 two nodes one rack", oneRack, "resnet50", 16, 120 * 1.1},
		{"resnet50 two racks", twoRacks, "resnet50", 16, 120 * 1.3},
		{"deepspeech two racks", twoRacks, "deepspeech", 16, 120 * 1.15},
		{"unknown model is cv", twoRacks, "mystery-net", 16, 120 * 1.3},
	}
	for _, c := range cases {
		tr := &trace.Trace{Jobs: []trace.Job{{ID: "j", GPUs: c.gpus, Duration: 120, Submit: 7, Model: c.model}}}
		for _, pol := range []string{"fifo", "srtf", "tiresias-las"} {
			r := run(t, Config{Trace: tr, Cluster: c.cl, Policy: newPolicy(t, pol)})
			j := r.Jobs[0]
			if !j.Finished || math.Abs(j.JCT()-c.jct) > tol || j.Start != 7 {
				t.Errorf("%s under %s: started %v, JCT %v (finished %v), want start 7, JCT %v", c.name, pol, j.Start, j.JCT(), j.Finished, c.jct)
			}
		}
	}
}

func TestZeroDurationJobs(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{
		{ID: "z0", GPUs: 1, Duration: 0, Submit: 5},
		{ID: "long", GPUs: 8, Duration: 100, Submit: 10},
		{ID: "z1", GPUs: 8, Duration: 0, Submit: 20}, // waits for long under fifo
		{ID: "z2", GPUs: 2, Duration: 0, Submit: 200},
	}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	want := map[string][3]float64{ // start, end, queue
		"z0": {5, 5, 0}, "long": {10, 110, 0}, "z1": {110, 110, 90}, "z2": {200, 200, 0},
	}
	r := run(t, Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, "fifo")})
	for _, j := range r.Jobs {
		w := want[j.ID]
		if !j.Finished || math.Abs(j.Start-w[0]) > tol || math.Abs(j.End-w[1]) > tol || math.Abs(j.Queue-w[2]) > tol {
			t.Errorf("%s: finished %v start %v end %v queue %v, want start %v end %v queue %v", j.ID, j.Finished, j.Start, j.End, j.Queue, w[0], w[1], w[2])
		}
	}
	if math.Abs(r.Makespan-195) > tol {
		t.Errorf("makespan %v, want 195 (5 to 200)", r.Makespan)
	}
}

// TestRunRejectsBadTimes: a generated or transformed trace with a job
// whose submit time or duration is not a finite number >= 0 is an error
// naming the job, not a simulation that never ends.
func TestRunRejectsBadTimes(t *testing.T) {
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	for _, tc := range []struct {
		submit, dur float64
		want        string
	}{
		{math.NaN(), 1, "submit time"}, {math.Inf(1), 1, "submit time"}, {-1, 1, "submit time"},
		{0, math.NaN(), "duration"}, {0, math.Inf(1), "duration"}, {0, -5, "duration"},
	} {
		tr := &trace.Trace{Jobs: []trace.Job{{ID: "ok", GPUs: 1, Duration: 10}, {ID: "bad", GPUs: 1, Submit: tc.submit, Duration: tc.dur}}}
		_, err := Run(Config{Trace: tr, Cluster: cl, Policy: newPolicy(t, "fifo")})
		if err == nil || !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("submit %v, duration %v: err %v, want one naming job bad's %s", tc.submit, tc.dur, err, tc.want)
		}
	}
}

// TestJobLargerThanCluster: a 16-GPU job on an 8-GPU cluster never starts,
// does not block the jobs behind it, and the run ends.
func TestJobLargerThanCluster(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{
		{ID: "huge", GPUs: 16, Duration: 10},
		{ID: "a", GPUs: 4, Duration: 30, Submit: 1},
		{ID: "b", GPUs: 8, Duration: 20, Submit: 2},
	}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	for _, name := range rankingNames() {
		p := newPolicy(t, name)
		r := run(t, Config{Trace: tr, Cluster: cl, Policy: p, Seed: 1})
		huge, a, b := r.Jobs[0], r.Jobs[1], r.Jobs[2]
		if huge.Started || huge.Finished {
			t.Errorf("%s: the 16-GPU job started=%v finished=%v on 8 GPUs", name, huge.Started, huge.Finished)
		}
		if !a.Finished || !b.Finished {
			t.Errorf("%s: a finished=%v b finished=%v, want both", name, a.Finished, b.Finished)
		}
	}
}

// TestUnconsolidatableJobDoesNotStall: a 16-GPU job on a 16-GPU cluster of
// nodes 4 + 4 + 8 fits the cluster, but every policy consolidates it (skew
// above 1), and consolidation allows at most ceil(16/8) = 2 nodes while it
// needs 3 even on the empty cluster. It can never be placed, yet it is
// treated as placeable: FIFO blocks the queue behind it and the preemptive
// policies reserve the whole cluster for it, so the 1-GPU job never runs.
func TestUnconsolidatableJobDoesNotStall(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{
		{ID: "big", GPUs: 16, Duration: 10, Model: "resnet50"},
		{ID: "small", GPUs: 1, Duration: 5, Submit: 1, Model: "resnet50"},
	}}
	cl := mustCluster(t)(cluster.Mixed("n4n4n8", cluster.NodeGroup{Count: 2, GPUsPerNode: 4}, cluster.NodeGroup{Count: 1, GPUsPerNode: 8}))
	for _, name := range rankingNames() {
		p := newPolicy(t, name)
		r := run(t, Config{Trace: tr, Cluster: cl, Policy: p})
		if !r.Jobs[1].Finished {
			t.Errorf("%s: the 1-GPU job never ran on a 16-GPU cluster behind a 16-GPU job that can never be consolidated (big started=%v)", name, r.Jobs[0].Started)
		}
	}
}

func TestEmptyAndInvalid(t *testing.T) {
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	r := run(t, Config{Trace: &trace.Trace{Name: "empty"}, Cluster: cl, Policy: newPolicy(t, "fifo")})
	if len(r.Jobs) != 0 || len(r.Util) != 0 || r.Makespan != 0 || r.Preemptions != 0 || r.TotalGPUs != 8 || r.Trace != "empty" {
		t.Errorf("empty trace: %+v", r)
	}
	for _, cfg := range []Config{
		{Cluster: cl, Policy: newPolicy(t, "fifo")},
		{Trace: &trace.Trace{}, Policy: newPolicy(t, "fifo")},
		{Trace: &trace.Trace{}, Cluster: cl},
	} {
		if _, err := Run(cfg); err == nil {
			t.Errorf("Run(%+v) succeeded, want an error for the missing part", cfg)
		}
	}
}

// modelFree is a random trace without model names, so the simulator draws
// them from the seed.
func modelFree(n int, seed int64) *trace.Trace {
	rng := rand.New(rand.NewSource(seed))
	tr := &trace.Trace{Name: "random"}
	at := 0.0
	for i := 0; i < n; i++ {
		at += rng.ExpFloat64() * 20
		tr.Jobs = append(tr.Jobs, trace.Job{ID: fmt.Sprintf("j%d", i), GPUs: 1 << rng.Intn(4), Duration: 1 + rng.ExpFloat64()*300, Submit: at})
	}
	return tr
}

func TestDeterminism(t *testing.T) {
	tr := modelFree(200, 7)
	cl := mustCluster(t)(cluster.Mixed("mixed", cluster.NodeGroup{Count: 2, GPUsPerNode: 4}, cluster.NodeGroup{Count: 2, GPUsPerNode: 8}))
	for _, name := range rankingNames() {
		once := func(seed int64) *Result {
			p := newPolicy(t, name, settingsFor(name)...)
			r := run(t, Config{Trace: tr, Cluster: cl, Policy: p, Seed: seed, CheckpointCost: 10, RestoreCost: 20})
			r.WallSeconds = 0
			return r
		}
		a, b := once(1), once(1)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs with seed 1 differ", name)
		}
		c := once(2)
		differ := false
		for i := range a.Jobs {
			if a.Jobs[i].Model != c.Jobs[i].Model {
				differ = true
				break
			}
		}
		if !differ {
			t.Errorf("%s: seeds 1 and 2 drew the same model for all %d jobs", name, len(a.Jobs))
		}
	}
	// The trace itself is not changed by the run (models are drawn into
	// the result only).
	for _, j := range tr.Jobs {
		if j.Model != "" {
			t.Fatalf("Run wrote model %q into the caller's trace", j.Model)
		}
	}
}

// settingsFor gives the Tiresias policies thresholds small enough that the
// random traces cross them, and promotion. The first threshold over 8 GPUs
// (50 s) exceeds checkpoint + restore (30 s); see TestPromotionLivelock.
func settingsFor(name string) []string {
	switch name {
	case "tiresias-las", "tiresias-gittins":
		return []string{"tiresias.queues=400,4000", "tiresias.promote_knob=4"}
	}
	return nil
}

// TestPromotionLivelock: one 8-GPU node, tiresias-las with one threshold at
// 200 GPU-s (25 s for an 8-GPU job), PROMOTEKNOB 1, checkpoint + restore
// 30 s; A and B need 8 GPUs for 100 s each.
//
// A runs 0-25 and is demoted; B preempts it and runs 25-50 and is demoted;
// A (waited 25 >= 1 x 25) is promoted, preempts B and resumes with 30 s of
// restore, but the simulator counts the restore as executed time, so A is
// demoted at 75 with 5 s of restore left and no progress; B is promoted
// and the same happens to it, forever. Expected: the restore does not count
// as service (t_J is execution time), so each resumption makes progress and
// both jobs finish.
func TestPromotionLivelock(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{
		{ID: "A", GPUs: 8, Duration: 100, Model: "resnet50"},
		{ID: "B", GPUs: 8, Duration: 100, Model: "resnet50"},
	}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	p := newPolicy(t, "tiresias-las", "tiresias.queues=200", "tiresias.promote_knob=1")
	r, c := runChecked(t, Config{Trace: tr, Cluster: cl, Policy: p, CheckpointCost: 10, RestoreCost: 20}, 10000)
	for _, j := range r.Jobs {
		if !j.Finished {
			t.Errorf("%s did not finish after %d rounds", j.ID, c.rounds)
		}
	}
}

func TestCosts(t *testing.T) {
	for _, tc := range []struct {
		sets          []string
		ckpt, restore float64
		wantErr       bool
	}{
		{nil, 10, 20, false},
		{[]string{"sim.checkpoint_s=0", "sim.restore_s=5.5"}, 0, 5.5, false},
		{[]string{"sim.checkpoint_s=-1"}, 0, 0, true},
		{[]string{"sim.restore_s=inf"}, 0, 0, true},
		{[]string{"sim.checkpoint_s=nan"}, 0, 0, true},
		{[]string{"sim.checkpoint_s=x"}, 0, 0, true},
	} {
		k, err := core.ParseKnobs(tc.sets)
		if err != nil {
			t.Fatal(err)
		}
		c, r, err := Costs(k)
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "sim.")):
			t.Errorf("%v: %v, %v, %v; want an error naming the knob", tc.sets, c, r, err)
		case !tc.wantErr && (err != nil || c != tc.ckpt || r != tc.restore):
			t.Errorf("%v: %v, %v, %v; want %v, %v", tc.sets, c, r, err, tc.ckpt, tc.restore)
		}
	}
}

// embedsFIFO is a wrapper that forgot to state its own capabilities.
type embedsFIFO struct{ core.Policy }

// TestWrapperMustStateCapabilities: a policy that embeds another and does
// not state its own capabilities is refused, rather than run as the
// embedded policy (the scheduler would bypass the wrapper).
func TestWrapperMustStateCapabilities(t *testing.T) {
	tr := &trace.Trace{Jobs: []trace.Job{{ID: "a", GPUs: 1, Duration: 10}}}
	cl := mustCluster(t)(cluster.Uniform("n1g8", 1, 1, 8))
	_, err := Run(Config{Trace: tr, Cluster: cl, Policy: embedsFIFO{policies.FIFO{}}})
	if err == nil || !strings.Contains(err.Error(), "must state its own") {
		t.Fatalf("Run with a wrapper = %v, want it refused", err)
	}
}
