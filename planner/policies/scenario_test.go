package policies

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/gittins"
)

// Hand-built one-round scenarios for every policy: each case gives the
// cluster's grants and the jobs, and the outcome worked out by hand from the
// policy's definition (Tiresias, NSDI'19, section 3, for the tiresias-*
// cases).

// outcome is what one Decide did, by job ID.
type outcome struct {
	granted, preempted, promoted []string
	// nodes is how many nodes each granted job's GPUs span.
	nodes map[string]int
}

func decideOnce(t *testing.T, pol core.Policy, nodes []core.Node, jobs []core.Job, grants []core.Grant) outcome {
	t.Helper()
	where := map[string]string{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			where[g.ID] = n.ID
		}
	}
	d := core.Scheduler{Policy: pol, ExplainWaits: true}.Decide(core.State{Nodes: nodes, Jobs: jobs, Grants: grants}, time.Unix(1000, 0))
	o := outcome{nodes: map[string]int{}}
	for _, a := range d.Actions {
		switch a := a.(type) {
		case core.GrantAction:
			o.granted = append(o.granted, a.Grant.Job.ID)
			on := map[string]bool{}
			for _, id := range a.Grant.GPUs {
				on[where[id]] = true
			}
			o.nodes[a.Grant.Job.ID] = len(on)
		case core.PreemptAction:
			o.preempted = append(o.preempted, a.Grant.Job.ID)
		case core.PromoteAction:
			o.promoted = append(o.promoted, a.Job.ID)
		}
	}
	return o
}

// policy builds a policy by name with knobs, failing the test on error.
func policy(t *testing.T, name string, settings ...string) core.Policy {
	t.Helper()
	k, err := core.ParseKnobs(settings)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPolicy(name, k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// with sets service counters on a job built by job().
func with(j core.Job, f func(*core.Job)) core.Job { f(&j); return j }

func started(at int64, executed float64) func(*core.Job) {
	return func(j *core.Job) {
		j.Started, j.FirstStart = true, time.Unix(at, 0)
		j.Executed = executed
		j.Attained = executed * float64(j.GPUs)
	}
}

func twoNodes() []core.Node {
	n := []core.Node{node8("n0"), node8("n1")}
	n[0].Rack, n[1].Rack = "r0", "r0"
	return n
}

// sixAndSix holds 6 GPUs on each of n0 and n1, leaving 2 + 2 free.
func sixAndSix() []core.Grant {
	return []core.Grant{
		grant("run0", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5"),
		grant("run1", "id-n1", "n1-0", "n1-1", "n1-2", "n1-3", "n1-4", "n1-5"),
	}
}

func TestScenarios(t *testing.T) {
	// Running jobs in the sixAndSix grants; under the preemptive policies
	// they have first rank (started, little service, short remaining).
	running := func() []core.Job {
		r0 := with(job("run0", 6, 0, core.Granted), started(0, 1))
		r1 := with(job("run1", 6, 0, core.Granted), started(0, 1))
		r0.Remaining, r1.Remaining = 1, 1
		return []core.Job{r0, r1}
	}
	type tc struct {
		name   string
		pol    core.Policy
		nodes  []core.Node
		jobs   []core.Job
		grants []core.Grant
		want   outcome // nodes: only the listed jobs are checked
	}
	// Perfect-knowledge jobs on one node: a (8 GPUs, 10 s left, 80 GPU-s),
	// b (1 GPU, 50 s, 50 GPU-s), c (4 GPUs, 15 s, 60 GPU-s).
	oracle := []core.Job{
		with(job("a", 8, 1, core.Queued), func(j *core.Job) { j.Remaining = 10 }),
		with(job("b", 1, 2, core.Queued), func(j *core.Job) { j.Remaining = 50 }),
		with(job("c", 4, 3, core.Queued), func(j *core.Job) { j.Remaining = 15 }),
	}
	big := job("big", 4, 1, core.Queued) // fits only when spread over n0 and n1
	small := job("small", 1, 2, core.Queued)
	cases := []tc{
		{
			name: "fifo grants in submission order, not ID order",
			pol:  FIFO{}, nodes: []core.Node{node8("n0")},
			jobs: []core.Job{job("z", 4, 1, core.Queued), job("a", 4, 2, core.Queued), job("m", 1, 3, core.Queued)},
			want: outcome{granted: []string{"z", "a"}},
		},
		{
			name: "fifo head-of-line blocking: 4 GPUs free but split 2+2, so big waits and small waits behind it",
			pol:  FIFO{}, nodes: twoNodes(), jobs: append(running(), big, small), grants: sixAndSix(),
			want: outcome{},
		},
		{
			name: "fifo-skip backfills small past the blocked head",
			pol:  FIFOSkip{}, nodes: twoNodes(), jobs: append(running(), big, small), grants: sixAndSix(),
			want: outcome{granted: []string{"small"}, nodes: map[string]int{"small": 1}},
		},
		{
			name: "gandiva waits for a consolidated placement rather than spread big, and packs small",
			pol:  Gandiva{}, nodes: twoNodes(), jobs: append(running(), big, small), grants: sixAndSix(),
			want: outcome{granted: []string{"small"}},
		},
		{
			name: "srtf runs the shortest remaining time first: a (10 s) takes the whole node",
			pol:  SRTF{}, nodes: []core.Node{node8("n0")}, jobs: oracle,
			want: outcome{granted: []string{"a"}},
		},
		{
			name: "srsf runs the least remaining service first: b (50) and c (60), not a (80)",
			pol:  SRSF{}, nodes: []core.Node{node8("n0")}, jobs: oracle,
			want: outcome{granted: []string{"b", "c"}},
		},
		{
			name: "srtf preempts a running job with more time left for a shorter one",
			pol:  SRTF{}, nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("long", 8, 0, core.Granted), func(j *core.Job) { started(0, 10)(j); j.Remaining = 100 }),
				with(job("short", 2, 5, core.Queued), func(j *core.Job) { j.Remaining = 5 }),
			},
			grants: []core.Grant{grant("long", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7")},
			want:   outcome{granted: []string{"short"}, preempted: []string{"long"}},
		},
		{
			name: "srtf ranks unknown remaining time last: the known job runs",
			pol:  SRTF{}, nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("unknown", 8, 0, core.Queued), func(j *core.Job) { j.Remaining = -1 }),
				with(job("known", 8, 5, core.Queued), func(j *core.Job) { j.Remaining = 1e6 }),
			},
			want: outcome{granted: []string{"known"}},
		},
		{
			name: "las preempts a job with more attained service for a new one",
			pol:  LAS{}, nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("old", 8, 0, core.Granted), started(0, 100)),
				job("new", 4, 50, core.Queued),
			},
			grants: []core.Grant{grant("old", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7")},
			want:   outcome{granted: []string{"new"}, preempted: []string{"old"}},
		},
		{
			name: "las keeps the running job when the new job fits beside it",
			pol:  LAS{}, nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("old", 4, 0, core.Granted), started(0, 100)),
				job("new", 4, 50, core.Queued),
			},
			grants: []core.Grant{grant("old", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3")},
			want:   outcome{granted: []string{"new"}},
		},
		{
			// queues=100: old has 8 x 12.5 = 100 GPU-s, on the threshold, so it
			// is in the second queue and the new job outranks it.
			name: "tiresias-las demotes a job at its threshold and preempts it for a new job",
			pol:  policy(t, "tiresias-las", "tiresias.queues=100"), nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("old", 8, 0, core.Granted), started(0, 12.5)),
				job("new", 8, 50, core.Queued),
			},
			grants: []core.Grant{grant("old", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7")},
			want:   outcome{granted: []string{"new"}, preempted: []string{"old"}},
		},
		{
			// 8 x 12 = 96 GPU-s < 100: same queue, and a started job comes
			// before one never started (FIFO by first start).
			name: "tiresias-las keeps a job below its threshold",
			pol:  policy(t, "tiresias-las", "tiresias.queues=100"), nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("old", 8, 0, core.Granted), started(0, 12)),
				job("new", 8, 50, core.Queued),
			},
			grants: []core.Grant{grant("old", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7")},
			want:   outcome{},
		},
		{
			// Both in the second queue; early was submitted later but first
			// started earlier.
			name: "tiresias-las orders a queue by first start time, not submission",
			pol:  policy(t, "tiresias-las", "tiresias.queues=100"), nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("late", 8, 0, core.Queued), started(30, 20)),
				with(job("early", 8, 5, core.Queued), started(10, 20)),
			},
			want: outcome{granted: []string{"early"}},
		},
		{
			// starved: 160 GPU-s (second queue), waited 40 >= 2 x 20 executed:
			// promoted to the first queue, counters reset, so it outranks
			// runner (240 GPU-s, second queue), which is preempted.
			name: "tiresias-las promotes a starving job (PROMOTEKNOB) and runs it",
			pol:  policy(t, "tiresias-las", "tiresias.queues=100", "tiresias.promote_knob=2"), nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("runner", 8, 0, core.Granted), started(0, 30)),
				with(job("starved", 8, 1, core.Queued), func(j *core.Job) { started(5, 20)(j); j.Waited = 40 }),
			},
			grants: []core.Grant{grant("runner", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7")},
			want:   outcome{promoted: []string{"starved"}, granted: []string{"starved"}, preempted: []string{"runner"}},
		},
		{
			name: "tiresias-las does not promote before waited reaches PROMOTEKNOB x executed",
			pol:  policy(t, "tiresias-las", "tiresias.queues=100", "tiresias.promote_knob=2"), nodes: []core.Node{node8("n0")},
			jobs: []core.Job{
				with(job("runner", 8, 0, core.Granted), started(0, 30)),
				with(job("starved", 8, 1, core.Queued), func(j *core.Job) { started(5, 20)(j); j.Waited = 39.9 }),
			},
			grants: []core.Grant{grant("runner", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7")},
			want:   outcome{},
		},
		{
			name: "tiresias-las never promotes a job in the first queue",
			pol:  policy(t, "tiresias-las", "tiresias.queues=100", "tiresias.promote_knob=2"), nodes: []core.Node{node8("n0")},
			jobs: []core.Job{with(job("fresh", 8, 1, core.Queued), func(j *core.Job) { j.Waited = 1000 })},
			want: outcome{granted: []string{"fresh"}},
		},
		{
			name: "tiresias-las consolidates a job with skew above PACKLIMIT: waits rather than spread",
			pol:  policy(t, "tiresias-las"), nodes: twoNodes(), grants: sixAndSix(),
			jobs: append(running(), with(big, func(j *core.Job) { j.Skew = 1.5 })),
			want: outcome{},
		},
		{
			name: "tiresias-las spreads a job with skew at PACKLIMIT over two nodes",
			pol:  policy(t, "tiresias-las"), nodes: twoNodes(), grants: sixAndSix(),
			jobs: append(running(), with(big, func(j *core.Job) { j.Skew = 1.0 })),
			want: outcome{granted: []string{"big"}, nodes: map[string]int{"big": 2}},
		},
		{
			name: "tiresias-las spreads a job with skew below a raised PACKLIMIT",
			pol:  policy(t, "tiresias-las", "tiresias.pack_limit=2"), nodes: twoNodes(), grants: sixAndSix(),
			jobs: append(running(), with(big, func(j *core.Job) { j.Skew = 1.5 })),
			want: outcome{granted: []string{"big"}, nodes: map[string]int{"big": 2}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decideOnce(t, c.pol, c.nodes, c.jobs, c.grants)
			check := func(what string, got, want []string) {
				if !slices.Equal(got, want) {
					t.Errorf("%s %v, want %v", what, got, want)
				}
			}
			check("granted", got.granted, c.want.granted)
			check("preempted", got.preempted, c.want.preempted)
			check("promoted", got.promoted, c.want.promoted)
			for id, n := range c.want.nodes {
				if got.nodes[id] != n {
					t.Errorf("%s spans %d nodes, want %d", id, got.nodes[id], n)
				}
			}
		})
	}
}

func TestTiresiasLevels(t *testing.T) {
	tr := policy(t, "tiresias-las", "tiresias.queues=100,400").(*Tiresias)
	cases := []struct {
		gpus     int
		executed float64
		want     int
	}{
		{1, 0, 0}, {1, 99.5, 0}, {1, 100, 1}, {4, 25, 1}, {4, 99.75, 1}, {8, 50, 2}, {2, 1e9, 2},
	}
	for _, c := range cases {
		j := core.Job{GPUs: c.gpus, Executed: c.executed}
		if got := tr.Level(&j); got != c.want {
			t.Errorf("%d GPUs x %g s = %g GPU-s: queue %d, want %d", c.gpus, c.executed, j.AttainedSinceReset(), got, c.want)
		}
	}
	// Promotion resets Executed, not Attained: a promoted job's queue is
	// computed from service since the reset.
	j := core.Job{GPUs: 8, Executed: 0, Attained: 1e6}
	if got := tr.Level(&j); got != 0 {
		t.Errorf("job with reset counters and 1e6 GPU-s in total: queue %d, want 0", got)
	}
}

// TestTiresiasPromoteResetsCounters checks the promotion in Decide itself:
// the promoted job's queue is recomputed from zeroed counters, while the
// caller's State is left alone.
func TestTiresiasPromoteResetsCounters(t *testing.T) {
	pol := policy(t, "tiresias-las", "tiresias.queues=100", "tiresias.promote_knob=1")
	jobs := []core.Job{with(job("s", 8, 0, core.Queued), func(j *core.Job) { started(0, 20)(j); j.Waited = 20 })}
	var seen []core.Job
	spy := rankSpy{Policy: pol, seen: &seen}
	d := core.Scheduler{Policy: spy}.Decide(core.State{Nodes: []core.Node{node8("n0")}, Jobs: jobs}, time.Unix(100, 0))
	if len(d.Actions) != 2 {
		t.Fatalf("actions %v, want a promotion and a grant", d.Actions)
	}
	if p, ok := d.Actions[0].(core.PromoteAction); !ok || p.Job.ID != "s" {
		t.Fatalf("first action %v, want PromoteAction for s", d.Actions[0])
	}
	if len(seen) != 1 || seen[0].Executed != 0 || seen[0].Waited != 0 || seen[0].Attained != 160 {
		t.Fatalf("ranked %+v, want executed and waited reset, attained kept at 160", seen)
	}
	if jobs[0].Executed != 20 || jobs[0].Waited != 20 {
		t.Fatalf("Decide changed the caller's job: %+v", jobs[0])
	}
}

// rankSpy records the jobs a policy ranks; it forwards Promote.
type rankSpy struct {
	core.Policy
	seen *[]core.Job
}

func (r rankSpy) Rank(now time.Time, jobs []*core.Job) {
	for _, j := range jobs {
		*r.seen = append(*r.seen, *j)
	}
	r.Policy.Rank(now, jobs)
}

func (r rankSpy) Promote(now time.Time, jobs []*core.Job) []core.JobKey {
	return r.Policy.(core.Promoter).Promote(now, jobs)
}

// TestTiresiasGittinsOrder checks 2D-Gittins inside the first queue
// (queues=100, quantum 100 GPU-s) with job sizes {50, 50, 50, 1000}:
//
//	a = 0:  P(S <= 100) = 3/4, E[min(S, 100)] = (3x50 + 100)/4 = 62.5: index 0.012
//	a = 40: P(S-40 <= 100 | S > 40) = 3/4, E[min(S-40, 100)] = (3x10 + 100)/4 = 32.5: index 0.0231
//	a = 60: only 1000 is left, 940 > 100: index 0
//
// so the job with 40 GPU-s outranks a new job, which outranks the one with
// 60, while 2D-LAS orders them by first start (started before new).
func TestTiresiasGittinsOrder(t *testing.T) {
	dist, err := gittins.New([]float64{50, 50, 50, 1000})
	if err != nil {
		t.Fatal(err)
	}
	if i0, i40, i60 := dist.Index(0, 100), dist.Index(40, 100), dist.Index(60, 100); math.Abs(i0-0.75/62.5) > 1e-12 || math.Abs(i40-0.75/32.5) > 1e-12 || i60 != 0 {
		t.Fatalf("indexes %g %g %g, want %g %g 0", i0, i40, i60, 0.75/62.5, 0.75/32.5)
	}
	// 8-GPU jobs: a60 first started at 0 (60 GPU-s), a40 at 10 (40 GPU-s),
	// fresh never started. One 8-GPU node: only the first ranked runs.
	jobs := func(with60, with40, withNew bool) []core.Job {
		var js []core.Job
		if with60 {
			js = append(js, with(job("a60", 8, 0, core.Queued), started(0, 7.5)))
		}
		if with40 {
			js = append(js, with(job("a40", 8, 1, core.Queued), started(10, 5)))
		}
		if withNew {
			js = append(js, job("fresh", 8, 2, core.Queued))
		}
		return js
	}
	cases := []struct {
		name           string
		jobs           []core.Job
		gittins, las2d string
	}{
		{"a40 before a60", jobs(true, true, false), "a40", "a60"},
		{"fresh before a60", jobs(true, false, true), "fresh", "a60"},
		{"a40 before fresh", jobs(false, true, true), "a40", "a40"},
		{"all three", jobs(true, true, true), "a40", "a60"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := policy(t, "tiresias-gittins", "tiresias.queues=100").(*Tiresias)
			g.SetIndex(dist)
			got := decideOnce(t, g, []core.Node{node8("n0")}, c.jobs, nil)
			if !slices.Equal(got.granted, []string{c.gittins}) {
				t.Errorf("tiresias-gittins granted %v, want [%s]", got.granted, c.gittins)
			}
			got = decideOnce(t, policy(t, "tiresias-las", "tiresias.queues=100"), []core.Node{node8("n0")}, c.jobs, nil)
			if !slices.Equal(got.granted, []string{c.las2d}) {
				t.Errorf("tiresias-las granted %v, want [%s]", got.granted, c.las2d)
			}
		})
	}
	// In the last queue the quantum is infinite and 2D-Gittins is FIFO by
	// first start: with both jobs past 100 GPU-s, the earlier start runs.
	g := policy(t, "tiresias-gittins", "tiresias.queues=100").(*Tiresias)
	g.SetIndex(dist)
	last := []core.Job{with(job("later", 8, 0, core.Queued), started(20, 100)), with(job("earlier", 8, 1, core.Queued), started(10, 13))}
	if got := decideOnce(t, g, []core.Node{node8("n0")}, last, nil); !slices.Equal(got.granted, []string{"earlier"}) {
		t.Errorf("last queue: tiresias-gittins granted %v, want [earlier]", got.granted)
	}
}

func TestKnobErrorsNameTheKnob(t *testing.T) {
	cases := []struct {
		policy   string
		settings []string
		want     []string // substrings of the error
	}{
		{"tiresias-las", []string{"tiresias.queue=100"}, []string{"tiresias.queue", "unknown"}},
		{"fifo", []string{"fifo.queues=100"}, []string{"fifo.queues", "fifo"}},
		{"fifo", []string{"queues=100"}, []string{"queues", "unknown"}},
		{"tiresias-las", []string{"tiresias.queues=abc"}, []string{"tiresias.queues", "abc"}},
		{"tiresias-las", []string{"tiresias.queues=400,100"}, []string{"tiresias.queues", "increasing"}},
		{"tiresias-las", []string{"tiresias.queues=-5"}, []string{"tiresias.queues", "positive"}},
		{"tiresias-las", []string{"tiresias.promote_knob=often"}, []string{"tiresias.promote_knob", "often"}},
		{"tiresias-gittins", []string{"tiresias.pack_limit=NaN"}, []string{"tiresias.pack_limit", "NaN"}},
		{"tiresias-las", []string{"tiresias.gittins_dist=x.csv"}, []string{"tiresias.gittins_dist"}},
		{"lottery", nil, []string{`"lottery"`, "unknown"}},
	}
	for _, c := range cases {
		t.Run(c.policy+" "+strings.Join(c.settings, " "), func(t *testing.T) {
			k, err := core.ParseKnobs(c.settings)
			if err != nil {
				t.Fatal(err)
			}
			_, err = newPolicy(c.policy, k)
			if err == nil {
				// A knob of no policy's namespace is the run's to refuse,
				// once every owner read its own (Knobs.Unused).
				err = k.Unused()
			}
			if err == nil {
				t.Fatalf("newPolicy(%q, %v) and the run-wide check succeeded, want an error", c.policy, c.settings)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := core.ParseKnobs([]string{"tiresias.queues"}); err == nil || !strings.Contains(err.Error(), "tiresias.queues") {
		t.Errorf("ParseKnobs without '=': error %v, want one naming the setting", err)
	}
	// Accepted forms.
	tr := policy(t, "tiresias-las", "tiresias.queues=100, 1h", "tiresias.promote_knob=inf", "tiresias.pack_limit=1.5").(*Tiresias)
	if !slices.Equal(tr.Thresholds, []float64{100, 3600}) || !math.IsInf(tr.PromoteKnob, 1) || tr.PackLimit != 1.5 {
		t.Errorf("knobs read as %v %v %v", tr.Thresholds, tr.PromoteKnob, tr.PackLimit)
	}
}

// A comparison passes one set of knobs to several policies: each ignores the
// other policies' namespaces, and a knob that no policy of the run used is
// still an error (Knobs.Unused, checked once every owner read its knobs),
// naming the knob that was read nearest to it.
func TestKnobsAcrossPolicies(t *testing.T) {
	k, err := core.ParseKnobs([]string{"tiresias.queues=100", "tiresias.qeueus=5"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newPolicy("fifo", k); err != nil {
		t.Fatalf("fifo rejected another policy's knob: %v", err)
	}
	if _, err := newPolicy("tiresias-las", k); err == nil || !strings.Contains(err.Error(), "tiresias.qeueus") {
		t.Fatalf("tiresias-las accepted a misspelt knob: %v", err)
	}
	if err := k.Unused(); err == nil || !strings.Contains(err.Error(), "tiresias.qeueus (did you mean tiresias.queues?)") {
		t.Fatalf("the run-wide check missed the misspelt knob: %v", err)
	}
	ok, _ := core.ParseKnobs([]string{"tiresias.queues=100"})
	if _, err := newPolicy("fifo", ok); err != nil {
		t.Fatal(err)
	}
	if err := ok.Unused(); err == nil {
		t.Fatal("a knob no policy of the run used passed the run-wide check")
	}
}

// tiresias.promote_every batches promotion checks on multiples of the
// interval; demotions of running jobs stay exact.
func TestTiresiasPromoteEvery(t *testing.T) {
	now := time.Unix(1000, 0)
	waiting := &core.Job{Key: core.JobKey{Namespace: "default", ID: "w"}, GPUs: 1, Phase: core.Queued, Executed: 100, Waited: 50} // due in 2 x 100 - 50 = 150 s
	running := &core.Job{Key: core.JobKey{Namespace: "default", ID: "r"}, GPUs: 1, Phase: core.Granted, Executed: 10}             // demoted in 90 s
	for _, tc := range []struct {
		every string
		jobs  []*core.Job
		want  int64
	}{
		{"", []*core.Job{waiting}, 1150},
		{"60s", []*core.Job{waiting}, 1200},
		{"1m", []*core.Job{waiting, running}, 1090},
		{"7", []*core.Job{waiting}, 1155},
	} {
		settings := []string{"tiresias.queues=100", "tiresias.promote_knob=2"}
		if tc.every != "" {
			settings = append(settings, "tiresias.promote_every="+tc.every)
		}
		p := policy(t, "tiresias-las", settings...).(*Tiresias)
		if got := p.NextChange(now, tc.jobs); got.Unix() != tc.want {
			t.Errorf("promote_every=%s: next change at %d, want %d", tc.every, got.Unix(), tc.want)
		}
	}
	for _, bad := range []string{"-1", "0", "1,2", "soon"} {
		k, _ := core.ParseKnobs([]string{"tiresias.promote_every=" + bad})
		if _, err := newPolicy("tiresias-las", k); err == nil {
			t.Errorf("promote_every=%s: no error", bad)
		}
	}
}
