package workload

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/trace"
)

// phillyTrace loads shared/traces/philly.csv, which sits beside the
// repository (../shared in CI, /work/shared here), once; the test is skipped
// when it is missing.
var phillyTrace = sync.OnceValues(func() (*trace.Trace, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		p := filepath.Join(dir, "shared", "traces", "philly.csv")
		if _, err := os.Stat(p); err == nil {
			return trace.Load(p)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, nil
		}
		dir = parent
	}
})

func philly(t testing.TB) *trace.Trace {
	t.Helper()
	tr, err := phillyTrace()
	if err != nil {
		t.Fatal(err)
	}
	if tr == nil {
		t.Skip("shared/traces/philly.csv not found beside the repository; skipping")
	}
	return tr
}

// sj is a synthetic job: submission time, VC, GPUs, duration.
type sj struct {
	at   float64
	vc   string
	gpus int
	dur  float64
}

// synth builds a trace of the jobs, sorted by submission; job i (in the
// given order) is "j<i>".
func synth(jobs ...sj) *trace.Trace {
	tr := &trace.Trace{Name: "synth.csv", Format: trace.FormatPhilly}
	for i, j := range jobs {
		tr.Jobs = append(tr.Jobs, trace.Job{Line: i + 2, ID: fmt.Sprintf("j%d", i), Submit: j.at, Duration: j.dur, GPUs: j.gpus, VC: j.vc})
	}
	slices.SortStableFunc(tr.Jobs, func(a, b trace.Job) int {
		if a.Submit != b.Submit {
			if a.Submit < b.Submit {
				return -1
			}
			return 1
		}
		return a.Line - b.Line
	})
	return tr
}

// burst is n jobs of one VC and size, step seconds apart from at.
func burst(at, step float64, n int, vc string, gpus int) []sj {
	out := make([]sj, n)
	for i := range out {
		out[i] = sj{at + float64(i)*step, vc, gpus, 100 + float64(i)}
	}
	return out
}

func cat(parts ...[]sj) []sj { return slices.Concat(parts...) }

// wholeTrace is a config over the whole trace with no single-job sampling.
func wholeTrace() ThemisConfig {
	cfg := DefaultThemisConfig()
	cfg.Start, cfg.Window, cfg.SingleFraction = 0, 0, 0
	return cfg
}

// appsOf groups a generated trace's job IDs by App, apps in order of first
// appearance.
func appsOf(tr *trace.Trace) (ids []string, jobs map[string][]trace.Job) {
	jobs = map[string][]trace.Job{}
	for _, j := range tr.Jobs {
		if _, ok := jobs[j.App]; !ok {
			ids = append(ids, j.App)
		}
		jobs[j.App] = append(jobs[j.App], j)
	}
	return ids, jobs
}

func mustW1(t testing.TB, tr *trace.Trace, cfg ThemisConfig) *trace.Trace {
	t.Helper()
	w, err := ThemisW1(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func mustW2(t testing.TB, tr *trace.Trace, cfg ThemisConfig) *trace.Trace {
	t.Helper()
	w, err := ThemisW2(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestThemisW1Grouping(t *testing.T) {
	ids := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("j%d", i))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		jobs []sj
		cfg  func(*ThemisConfig)
		want [][]string // job IDs per app, apps in arrival order
	}{
		{"one burst", burst(0, 10, 12, "a", 1), nil, [][]string{ids(0, 12)}},
		{"the gap is from the burst's latest job", burst(0, 59, 12, "a", 1), nil, [][]string{ids(0, 12)}},
		{"a longer gap starts a new burst", cat(burst(0, 10, 10, "a", 1), burst(161, 10, 10, "a", 1)), nil,
			[][]string{ids(0, 10), ids(10, 20)}},
		{"the gap bound is inclusive", cat(burst(0, 10, 10, "a", 1), burst(150, 10, 10, "a", 1)), nil,
			[][]string{ids(0, 20)}},
		{"VCs interleave", cat(burst(0, 2, 10, "a", 1), burst(1, 2, 10, "b", 1)), nil,
			[][]string{ids(0, 10), ids(10, 20)}},
		{"sizes interleave", cat(burst(0, 2, 10, "a", 1), burst(1, 2, 10, "a", 2)), nil,
			[][]string{ids(0, 10), ids(10, 20)}},
		{"jobs of more than 2 GPUs are dropped", cat(burst(0, 2, 10, "a", 1), burst(1, 2, 10, "a", 4)), nil,
			[][]string{ids(0, 10)}},
		{"max_job_gpus", cat(burst(0, 2, 10, "a", 1), burst(1, 2, 10, "a", 4)), func(c *ThemisConfig) { c.MaxJobGPUs = 4 },
			[][]string{ids(0, 10), ids(10, 20)}},
		{"a long burst is split evenly", burst(0, 1, 250, "a", 1), nil,
			[][]string{ids(0, 83), ids(83, 166), ids(166, 250)}},
		{"exactly max_app_jobs", burst(0, 1, 100, "a", 1), nil, [][]string{ids(0, 100)}},
		{"short bursts are dropped", cat(burst(0, 1, 9, "a", 1), burst(1000, 1, 10, "a", 1)), nil,
			[][]string{ids(9, 19)}},
		{"min_sweep_jobs", cat(burst(0, 1, 9, "a", 1), burst(1000, 1, 10, "a", 1)), func(c *ThemisConfig) { c.MinSweepJobs = 9 },
			[][]string{ids(0, 9), ids(9, 19)}},
		{"min_sweep_jobs 1 keeps every burst", cat(burst(0, 1, 2, "a", 1), burst(1000, 1, 1, "a", 1)), func(c *ThemisConfig) { c.MinSweepJobs = 1 },
			[][]string{ids(0, 2), ids(2, 3)}},
		{"window", cat(burst(0, 1, 10, "a", 1), burst(Day, 1, 10, "a", 1), burst(2*Day, 1, 10, "b", 1)),
			func(c *ThemisConfig) { c.Start, c.Window = Day, Day }, [][]string{ids(10, 20)}},
		{"a window cuts a burst", burst(0, 1, 30, "a", 1), func(c *ThemisConfig) { c.Start, c.Window = 5, 15 },
			[][]string{ids(5, 20)}},
		{"busiest window", cat(burst(0, 1, 10, "a", 1), burst(Day, 1, 20, "a", 1), burst(2.5*Day, 1, 15, "b", 1)),
			func(c *ThemisConfig) { c.Start, c.Window = StartBusiest, Day }, [][]string{ids(10, 30)}},
		{"apps are ordered by their first job", cat(burst(5, 2, 10, "a", 1), burst(0, 3, 10, "b", 1)), nil,
			[][]string{ids(10, 20), ids(0, 10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := wholeTrace()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			w := mustW1(t, synth(tc.jobs...), cfg)
			order, jobs := appsOf(w)
			var got [][]string
			for _, a := range order {
				var g []string
				for _, j := range jobs[a] {
					g = append(g, j.ID)
				}
				got = append(got, g)
			}
			// Each app's jobs are in submission order; compare as sets of IDs.
			norm := func(x [][]string) [][]string {
				y := make([][]string, len(x))
				for i := range x {
					y[i] = slices.Sorted(slices.Values(x[i]))
				}
				return y
			}
			if !reflect.DeepEqual(norm(got), norm(tc.want)) {
				t.Errorf("apps\n got %v\nwant %v", got, tc.want)
			}
			checkW1(t, w, cfg)
		})
	}
}

// checkW1 checks what every Workload 1 promises: jobs sorted, the first at
// 0; app IDs "app-<n>" numbered in arrival order; an app's jobs share a VC
// and a GPU count of at most MaxJobGPUs, follow each other by at most Gap
// and number 1 or MinSweepJobs to MaxAppJobs; every job in exactly one app,
// with the app's one model from Table 4; Phase 0.
func checkW1(t *testing.T, w *trace.Trace, cfg ThemisConfig) {
	t.Helper()
	if w.Format != FormatThemisW1 || len(w.Jobs) == 0 || w.Jobs[0].Submit != 0 {
		t.Fatalf("trace %s, format %s, %d jobs", w.Name, w.Format, len(w.Jobs))
	}
	seen := map[string]bool{}
	for i, j := range w.Jobs {
		if seen[j.ID] {
			t.Fatalf("job %s twice", j.ID)
		}
		seen[j.ID] = true
		if i > 0 && (w.Jobs[i-1].Submit > j.Submit || (w.Jobs[i-1].Submit == j.Submit && w.Jobs[i-1].Line >= j.Line)) {
			t.Fatalf("jobs %s, %s out of order", w.Jobs[i-1].ID, j.ID)
		}
		if j.App == "" || j.Phase != 0 || ThemisCategory(j.Model) == "" {
			t.Fatalf("job %+v", j)
		}
	}
	order, jobs := appsOf(w)
	for k, a := range order {
		if want := fmt.Sprintf("app-%04d", k+1); len(order) < 10000 && a != want {
			t.Errorf("app %d is %s, want %s (IDs in arrival order, from 1)", k, a, want)
		}
		js := jobs[a]
		if n := len(js); n != 1 && (n < cfg.MinSweepJobs || n > cfg.MaxAppJobs) {
			t.Errorf("app %s has %d jobs: want 1 or %d to %d", a, n, cfg.MinSweepJobs, cfg.MaxAppJobs)
		}
		for i, j := range js {
			if j.VC != js[0].VC || j.GPUs != js[0].GPUs || j.Model != js[0].Model || j.GPUs > cfg.MaxJobGPUs {
				t.Errorf("app %s: job %+v differs from %+v", a, j, js[0])
			}
			if i > 0 && j.Submit-js[i-1].Submit > cfg.Gap {
				t.Errorf("app %s: jobs %s and %s are %g s apart, more than the gap", a, js[i-1].ID, j.ID, j.Submit-js[i-1].Submit)
			}
		}
	}
}

func TestThemisSingleFraction(t *testing.T) {
	var jobs []sj
	for i := range 9 {
		jobs = append(jobs, burst(float64(i)*1000, 1, 20, "a", 1)...)
	}
	for i := range 50 {
		jobs = append(jobs, sj{float64(i)*1000 + 500, "b", 1, 10})
	}
	tr := synth(jobs...)
	for _, tc := range []struct {
		f                    float64
		sweeps, singles      int
		seedsPickingSameSets bool
	}{
		{0, 9, 0, true},
		{0.1, 9, 1, false},  // round(0.1/0.9 x 9) = 1
		{0.5, 9, 9, false},  // 9 of the 50
		{0.9, 9, 50, true},  // 81 wanted, 50 there
		{0.25, 9, 3, false}, // round(3)
	} {
		cfg := wholeTrace()
		cfg.SingleFraction = tc.f
		sets := map[string]bool{}
		for seed := range uint64(8) {
			cfg.Seed = seed
			w := mustW1(t, tr, cfg)
			checkW1(t, w, cfg)
			order, apps := appsOf(w)
			sweeps, singles := 0, []string{}
			for _, a := range order {
				if len(apps[a]) == 1 {
					singles = append(singles, apps[a][0].ID)
				} else {
					sweeps++
				}
			}
			if sweeps != tc.sweeps || len(singles) != tc.singles {
				t.Errorf("single_fraction %g seed %d: %d sweeps, %d singles; want %d, %d", tc.f, seed, sweeps, len(singles), tc.sweeps, tc.singles)
			}
			sets[strings.Join(singles, ",")] = true
		}
		if (len(sets) == 1) != tc.seedsPickingSameSets {
			t.Errorf("single_fraction %g: 8 seeds picked %d different sets of single-job apps", tc.f, len(sets))
		}
	}
}

func TestThemisW1Philly(t *testing.T) {
	tr := philly(t)
	cfg := DefaultThemisConfig()
	w := mustW1(t, tr, cfg)
	checkW1(t, w, cfg)
	byID := map[string]trace.Job{}
	for _, j := range tr.Jobs {
		byID[j.ID] = j
	}
	// Jobs are the trace's, re-based by one offset, within two weeks.
	origin := byID[w.Jobs[0].ID].Submit
	for _, j := range w.Jobs {
		o := byID[j.ID]
		if o.Line != j.Line || o.Duration != j.Duration || o.GPUs != j.GPUs || o.VC != j.VC || o.Submit-origin != j.Submit {
			t.Fatalf("job %+v is not the trace's %+v re-based by %g s", j, o, origin)
		}
		if j.Submit >= 14*Day {
			t.Fatalf("job %s at %g s, after the two weeks", j.ID, j.Submit)
		}
	}
	if got := w.Start.Sub(tr.Start); got != time.Duration(origin)*time.Second {
		t.Errorf("start %v, %v after the trace's, want %g s", w.Start, got, origin)
	}
	order, apps := appsOf(w)
	var sizes []int
	singles := 0
	for _, a := range order {
		if n := len(apps[a]); n == 1 {
			singles++
		} else {
			sizes = append(sizes, n)
		}
	}
	sort.Ints(sizes)
	sweeps := len(sizes)
	if want := int(math.Round(float64(sweeps) / 9)); singles != want {
		t.Errorf("%d single-job apps, want %d (10%% of %d apps)", singles, want, sweeps+singles)
	}
	med := sizes[sweeps/2]
	t.Logf("philly.csv workload 1: window from %v, %d jobs, %d apps: %d sweeps (median %d jobs, %d at 100) and %d single-job apps",
		w.Start, len(w.Jobs), len(order), sweeps, med, sweeps-sort.SearchInts(sizes, 100), singles)
	// Section 2.2's sweeps: "from a few tens to about a hundred", median 75.
	if sweeps < 100 || med < 50 || med > 100 {
		t.Errorf("%d sweeps, median %d jobs: want the paper's shape (hundreds of sweeps, median near 75)", sweeps, med)
	}
}

func TestThemisDeterministic(t *testing.T) {
	trs := []*trace.Trace{randomTrace(3000, 5)}
	if tr, _ := phillyTrace(); tr != nil {
		trs = append(trs, tr)
	}
	for _, tr := range trs {
		t.Run(tr.Name, func(t *testing.T) {
			cfg := DefaultThemisConfig()
			if tr.Name == "random.csv" {
				cfg.Start, cfg.Window = 0, 0
			}
			cfg.Seed = 42
			for _, gen := range []func(*trace.Trace, ThemisConfig) (*trace.Trace, error){ThemisW1, ThemisW2} {
				a, err1 := gen(tr, cfg)
				b, err2 := gen(tr, cfg)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("%s: the same config gave two different traces", a.Format)
				}
				other := cfg
				other.Seed = 43
				c, err := gen(tr, other)
				if err != nil {
					t.Fatal(err)
				}
				same := 0
				for i := range a.Jobs {
					if a.Jobs[i].Model == c.Jobs[i].Model {
						same++
					}
				}
				if len(a.Jobs) != len(c.Jobs) || same == len(a.Jobs) {
					t.Errorf("%s: seeds 42 and 43: %d and %d jobs, %d with the same model", a.Format, len(a.Jobs), len(c.Jobs), same)
				}
			}
		})
	}
}

// randomTrace is n jobs of random bursts over VCs, sizes and gaps.
func randomTrace(n int, seed uint64) *trace.Trace {
	r := rand.New(rand.NewPCG(seed, 0))
	var jobs []sj
	at := 0.0
	for len(jobs) < n {
		vc := fmt.Sprintf("vc%d", r.IntN(5))
		gpus := []int{1, 1, 1, 2, 4}[r.IntN(5)]
		k := []int{1, 1, 3, 12, 40, 130}[r.IntN(6)]
		step := float64(r.IntN(30))
		for i := range k {
			jobs = append(jobs, sj{at + float64(i)*step, vc, gpus, float64(r.IntN(20000))})
		}
		at += float64(r.IntN(600))
	}
	tr := synth(jobs...)
	tr.Name = "random.csv"
	return tr
}

func TestThemisModelMix(t *testing.T) {
	const apps = 30000
	jobs := make([]sj, apps)
	for i := range jobs {
		jobs[i] = sj{float64(i) * 1000, "a", 1, 60}
	}
	tr := synth(jobs...)
	for _, mix := range []ModelMix{ThemisMix, {CV: 0, NLP: 0, Speech: 1}, {CV: 0.5, NLP: 0.5, Speech: 0}} {
		cfg := wholeTrace()
		cfg.MinSweepJobs, cfg.MaxAppJobs, cfg.Mix = 1, 1, mix
		w := mustW1(t, tr, cfg)
		if len(w.Jobs) != apps {
			t.Fatalf("%d jobs, want %d apps of one", len(w.Jobs), apps)
		}
		byCat, byModel := map[string]int{}, map[string]int{}
		for _, j := range w.Jobs {
			byCat[ThemisCategory(j.Model)]++
			byModel[j.Model]++
		}
		share := map[string]float64{CategoryCV: mix.CV, CategoryNLP: mix.NLP, CategorySpeech: mix.Speech}
		perCat := map[string]int{}
		for _, m := range ThemisModels {
			perCat[m.Category]++
		}
		// Within 4.5 standard deviations of the binomial.
		within := func(count int, p float64) bool {
			sd := math.Sqrt(apps * p * (1 - p))
			return math.Abs(float64(count)-apps*p) <= 4.5*sd+1e-9
		}
		for c, p := range share {
			if !within(byCat[c], p) {
				t.Errorf("mix %+v: %d %s apps of %d, want about %g", mix, byCat[c], c, apps, p*apps)
			}
		}
		for _, m := range ThemisModels {
			if p := share[m.Category] / float64(perCat[m.Category]); !within(byModel[m.Name], p) {
				t.Errorf("mix %+v: %d %s apps, want about %g", mix, byModel[m.Name], m.Name, p*apps)
			}
		}
	}
}

func TestThemisModels(t *testing.T) {
	perCat := map[string]int{}
	names := map[string]bool{}
	// The substrings planner/sim's model classes look for (sim/models.go).
	simNames := map[string][]string{
		CategoryCV:     {"vgg", "alexnet", "resnet", "inception"},
		CategoryNLP:    {"lstm", "transformer", "bert", "gnmt", "nlp"},
		CategorySpeech: {"speech"},
	}
	for _, m := range ThemisModels {
		perCat[m.Category]++
		if names[m.Name] || m.Paper == "" || m.Dataset == "" {
			t.Errorf("model %+v: duplicate or incomplete", m)
		}
		names[m.Name] = true
		if ThemisCategory(m.Name) != m.Category {
			t.Errorf("ThemisCategory(%q) = %q, want %q", m.Name, ThemisCategory(m.Name), m.Category)
		}
		if !slices.ContainsFunc(simNames[m.Category], func(s string) bool { return strings.Contains(m.Name, s) }) {
			t.Errorf("model %q: planner/sim would not put it in the %s classes", m.Name, m.Category)
		}
	}
	if !reflect.DeepEqual(perCat, map[string]int{CategoryCV: 5, CategoryNLP: 4, CategorySpeech: 2}) {
		t.Errorf("models per category %v, want Table 4's 5, 4, 2", perCat)
	}
	if ThemisCategory("resnet") != "" {
		t.Error("ThemisCategory of a name not in Table 4 should be empty")
	}
	for _, tc := range []struct {
		u, v float64
		want string
	}{
		{0, 0, "inception3"},
		{0.099, 0.999, "vgg19"},
		{0.1, 0, "nlp-bidaf"},
		{0.69, 0.5, "gnmt"},
		{0.7, 0, "speech-wavenet"},
		{0.999999, 0.999999, "deepspeech"},
	} {
		if got := ThemisMix.draw(tc.u, tc.v); got != tc.want {
			t.Errorf("draw(%g, %g) = %q, want %q", tc.u, tc.v, got, tc.want)
		}
	}
	// Shares summing to just below 1 never draw an empty category.
	if got := (ModelMix{CV: 0.3, NLP: 0.7 - 1e-9}).draw(0.9999999999, 0); got != "nlp-bidaf" {
		t.Errorf("rounding: %q", got)
	}
}

// The halving structure (section 4.3.2): for a Workload 1 app of k jobs of
// g GPUs and budget B, n = min(2^floor(log2 k), MaxSweep) trials and phases
// of n, n/2, ..., 1 jobs of g, 2g, ..., n·g GPUs, each phase B/P of the work
// with the same duration and doubling iterations.
func TestThemisW2Halving(t *testing.T) {
	trs := []*trace.Trace{randomTrace(5000, 9)}
	if tr, _ := phillyTrace(); tr != nil {
		trs = append(trs, tr)
	}
	for _, tr := range trs {
		t.Run(tr.Name, func(t *testing.T) {
			cfg := DefaultThemisConfig()
			if tr.Name == "random.csv" {
				cfg.Start, cfg.Window, cfg.MinSweepJobs, cfg.MaxSweep = 0, 0, 2, 16
			}
			w1, w2 := mustW1(t, tr, cfg), mustW2(t, tr, cfg)
			checkW2(t, w1, w2, cfg)
		})
	}
}

func checkW2(t *testing.T, w1, w2 *trace.Trace, cfg ThemisConfig) {
	t.Helper()
	if w2.Format != FormatThemisW2 || !w2.Start.Equal(w1.Start) {
		t.Fatalf("format %s, start %v (workload 1's %v)", w2.Format, w2.Start, w1.Start)
	}
	for i, j := range w2.Jobs {
		if j.Line != i+2 || (i > 0 && w2.Jobs[i-1].Submit > j.Submit) {
			t.Fatalf("job %d: %+v: want line %d, sorted by submission", i, j, i+2)
		}
	}
	order1, apps1 := appsOf(w1)
	order2, apps2 := appsOf(w2)
	if !slices.Equal(order1, order2) {
		t.Fatalf("workload 2's apps %v, want workload 1's %v", order2, order1)
	}
	for _, a := range order1 {
		js1, js2 := apps1[a], apps2[a]
		k, g := len(js1), js1[0].GPUs
		budget := 0.0
		for _, j := range js1 {
			budget += float64(j.GPUs) * j.Duration
		}
		n := min(1<<(bits.Len(uint(k))-1), cfg.MaxSweep)
		if n&(n-1) != 0 || n > k {
			t.Fatalf("n = %d", n)
		}
		phases := bits.Len(uint(n))
		if len(js2) != 2*n-1 {
			t.Fatalf("app %s (%d jobs): %d jobs, want %d", a, k, len(js2), 2*n-1)
		}
		work := 0.0
		i := 0
		for p := 1; p <= phases; p++ {
			for trial := range n >> (p - 1) {
				j := js2[i]
				i++
				want := trace.Job{
					Line: j.Line, ID: fmt.Sprintf("%s-p%d-t%d", a, p, trial),
					Submit: js1[0].Submit, Duration: js2[0].Duration, GPUs: g << (p - 1), VC: js1[0].VC, Model: js1[0].Model,
					Iterations: cfg.PhaseIterations << (p - 1), App: a, Phase: p,
				}
				if j != want {
					t.Fatalf("app %s phase %d trial %d:\n got %+v\nwant %+v", a, p, trial, j, want)
				}
				work += float64(j.GPUs) * j.Duration
			}
		}
		if math.Abs(work-budget) > 1e-9*budget {
			t.Errorf("app %s: %g GPU-seconds, want workload 1's %g", a, work, budget)
		}
		if math.Abs(js2[0].Duration*float64(phases*n*g)-budget) > 1e-9*budget {
			t.Errorf("app %s: duration %g, want B/(P n g) = %g", a, js2[0].Duration, budget/float64(phases*n*g))
		}
	}
}

// Section 4.3.3's example: an app of 4 jobs with a budget of 10,000
// GPU-seconds runs 3 phases of 4, 2, 1 jobs.
func TestThemisW2PaperExample(t *testing.T) {
	tr := synth(sj{0, "a", 1, 2000}, sj{1, "a", 1, 3000}, sj{2, "a", 1, 2500}, sj{3, "a", 1, 2500})
	cfg := wholeTrace()
	cfg.MinSweepJobs = 4
	w := mustW2(t, tr, cfg)
	var got []string
	for _, j := range w.Jobs {
		got = append(got, fmt.Sprintf("%s %d GPUs %.2f s %d it", j.ID, j.GPUs, j.Duration, j.Iterations))
	}
	want := []string{
		"app-0001-p1-t0 1 GPUs 833.33 s 1000 it",
		"app-0001-p1-t1 1 GPUs 833.33 s 1000 it",
		"app-0001-p1-t2 1 GPUs 833.33 s 1000 it",
		"app-0001-p1-t3 1 GPUs 833.33 s 1000 it",
		"app-0001-p2-t0 2 GPUs 833.33 s 2000 it",
		"app-0001-p2-t1 2 GPUs 833.33 s 2000 it",
		"app-0001-p3-t0 4 GPUs 833.33 s 4000 it",
	}
	if !slices.Equal(got, want) {
		t.Errorf("jobs\n got %q\nwant %q", got, want)
	}
	// 2-GPU trials start at 2 GPUs and end at 2n; 7 jobs make n = 4.
	tr = synth(burst(0, 1, 7, "a", 2)...)
	cfg.MinSweepJobs = 1
	w = mustW2(t, tr, cfg)
	if len(w.Jobs) != 7 || w.Jobs[0].GPUs != 2 || w.Jobs[6].GPUs != 8 || w.Jobs[6].Phase != 3 {
		t.Errorf("7 jobs of 2 GPUs: %+v", w.Jobs)
	}
	// A single-job app is one phase of its job.
	tr = synth(sj{0, "a", 2, 500})
	w = mustW2(t, tr, cfg)
	if len(w.Jobs) != 1 || w.Jobs[0].GPUs != 2 || w.Jobs[0].Duration != 500 || w.Jobs[0].Phase != 1 || w.Jobs[0].ID != "app-0001-p1-t0" {
		t.Errorf("single job: %+v", w.Jobs)
	}
}

// Apps and MaxJobs keep a prefix of the full workload: the same apps, IDs,
// models and jobs.
func TestThemisSubset(t *testing.T) {
	tr := randomTrace(4000, 3)
	cfg := wholeTrace()
	cfg.MinSweepJobs = 2
	full1, full2 := mustW1(t, tr, cfg), mustW2(t, tr, cfg)
	order, apps := appsOf(full1)
	if len(order) < 20 {
		t.Fatalf("only %d apps", len(order))
	}
	prefix := func(w, full *trace.Trace) {
		t.Helper()
		ids, _ := appsOf(w)
		keep := map[string]bool{}
		for _, a := range ids {
			keep[a] = true
		}
		var want []trace.Job
		for _, j := range full.Jobs {
			if keep[j.App] {
				want = append(want, j)
			}
		}
		// Re-based on the same first app, so Submit matches.
		if !reflect.DeepEqual(w.Jobs, want) && !(w.Format == FormatThemisW2 && sameButLines(w.Jobs, want)) {
			t.Errorf("%s: the subset is not a prefix of the full workload", w.Format)
		}
	}
	for _, n := range []int{1, 7, len(order)} {
		c := cfg
		c.Apps = n
		w1, w2 := mustW1(t, tr, c), mustW2(t, tr, c)
		if ids, _ := appsOf(w1); !slices.Equal(ids, order[:n]) {
			t.Errorf("apps = %d: %v", n, ids)
		}
		prefix(w1, full1)
		prefix(w2, full2)
	}
	jobs := 0
	for _, a := range order[:10] {
		jobs += len(apps[a])
	}
	for _, limit := range []int{jobs, jobs + len(apps[order[10]]) - 1} {
		c := cfg
		c.MaxJobs = limit
		w1 := mustW1(t, tr, c)
		if ids, _ := appsOf(w1); !slices.Equal(ids, order[:10]) || len(w1.Jobs) != jobs {
			t.Errorf("max_jobs = %d: %d apps, %d jobs; want 10, %d", limit, len(ids), len(w1.Jobs), jobs)
		}
		prefix(w1, full1)
		prefix(mustW2(t, tr, c), full2)
	}
	c := cfg
	c.MaxJobs = len(apps[order[0]]) - 1
	if c.MaxJobs > 0 {
		if _, err := ThemisW1(tr, c); err == nil || !strings.Contains(err.Error(), "max_jobs") {
			t.Errorf("max_jobs below the first app: err %v", err)
		}
	}
}

// sameButLines compares Workload 2 jobs but their Lines (numbered per trace).
func sameButLines(a, b []trace.Job) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.Line, y.Line = 0, 0
		if x != y {
			return false
		}
	}
	return true
}

func TestBusiestStart(t *testing.T) {
	for _, tc := range []struct {
		at     []float64
		window float64
		want   float64
	}{
		{[]float64{0, 1, 2}, 0, 0},
		{[]float64{0, Day + 1, Day + 2, 3 * Day}, Day, Day},
		{[]float64{0, Day + 1, Day + 2, 3 * Day}, 2 * Day, 0}, // [0, 2 days) holds 3
		{[]float64{0.5 * Day, 1.5 * Day, 5 * Day, 5.1 * Day}, 2 * Day, 0},
		{[]float64{10 * Day, 10.5 * Day}, 14 * Day, 10 * Day},
	} {
		var jobs []sj
		for _, a := range tc.at {
			jobs = append(jobs, sj{a, "a", 1, 1})
		}
		if got := busiestStart(synth(jobs...).Jobs, tc.window); got != tc.want {
			t.Errorf("busiestStart(%v, %g) = %g, want %g", tc.at, tc.window, got, tc.want)
		}
	}
}

func TestThemisErrors(t *testing.T) {
	ok := synth(burst(0, 1, 20, "a", 1)...)
	unsorted := synth(burst(0, 1, 20, "a", 1)...)
	unsorted.Jobs[0], unsorted.Jobs[1] = unsorted.Jobs[1], unsorted.Jobs[0]
	zero := synth(burst(0, 1, 20, "a", 1)...)
	zero.Jobs[3].GPUs = 0
	for _, tc := range []struct {
		name string
		tr   *trace.Trace
		cfg  func(*ThemisConfig)
		want string
	}{
		{"nil trace", nil, nil, "no jobs"},
		{"empty trace", &trace.Trace{}, nil, "no jobs"},
		{"unsorted", unsorted, nil, "not sorted"},
		{"zero GPUs", zero, nil, "j3 asks for 0 GPUs"},
		{"nothing in the window", ok, func(c *ThemisConfig) { c.Start = 100 }, "no job of at most 2 GPUs"},
		{"no sweep", ok, func(c *ThemisConfig) { c.MinSweepJobs = 30; c.MaxAppJobs = 40 }, "no app"},
		{"bad start", ok, func(c *ThemisConfig) { c.Start = -2 }, "window start"},
		{"NaN window", ok, func(c *ThemisConfig) { c.Window = math.NaN() }, "window"},
		{"max job gpus", ok, func(c *ThemisConfig) { c.MaxJobGPUs = 0 }, "max_job_gpus"},
		{"gap", ok, func(c *ThemisConfig) { c.Gap = -1 }, "app_gap"},
		{"min sweep", ok, func(c *ThemisConfig) { c.MinSweepJobs = 0 }, "min_sweep_jobs"},
		{"max app jobs", ok, func(c *ThemisConfig) { c.MaxAppJobs = 5 }, "max_app_jobs"},
		{"single fraction", ok, func(c *ThemisConfig) { c.SingleFraction = 1 }, "single_fraction"},
		{"mix", ok, func(c *ThemisConfig) { c.Mix = ModelMix{CV: 0.5, NLP: 0.6} }, "model mix"},
		{"negative mix", ok, func(c *ThemisConfig) { c.Mix = ModelMix{CV: -0.5, NLP: 1.5} }, "model mix"},
		{"apps", ok, func(c *ThemisConfig) { c.Apps = -1 }, "apps"},
		{"max jobs", ok, func(c *ThemisConfig) { c.MaxJobs = -1 }, "max_jobs"},
		{"max sweep", ok, func(c *ThemisConfig) { c.MaxSweep = 48 }, "max_sweep"},
		{"phase iterations", ok, func(c *ThemisConfig) { c.PhaseIterations = 0 }, "phase_iterations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := wholeTrace()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			for _, gen := range []func(*trace.Trace, ThemisConfig) (*trace.Trace, error){ThemisW1, ThemisW2} {
				w, err := gen(tc.tr, cfg)
				if err == nil || w != nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("got %v, %v; want an error containing %q", w, err, tc.want)
				}
			}
		})
	}
}

func TestThemisFromKnobs(t *testing.T) {
	def := DefaultThemisConfig()
	for _, c := range []struct {
		name string
		kv   []string
		want func(*ThemisConfig)
	}{
		{"defaults", nil, func(*ThemisConfig) {}},
		{"seed", []string{KnobSeed, "7"}, func(c *ThemisConfig) { c.Seed = 7 }},
		{"apps", []string{KnobApps, "50"}, func(c *ThemisConfig) { c.Apps = 50 }},
		{"max jobs", []string{KnobMaxJobs, "2^12"}, func(c *ThemisConfig) { c.MaxJobs = 4096 }},
		{"window in days", []string{KnobWindow, "7d"}, func(c *ThemisConfig) { c.Window = 7 * Day }},
		{"window as a Go duration", []string{KnobWindow, "36h"}, func(c *ThemisConfig) { c.Window = 36 * hour }},
		{"whole trace", []string{KnobWindow, "0", KnobWindowStart, "0"}, func(c *ThemisConfig) { c.Window, c.Start = 0, 0 }},
		{"window start in seconds", []string{KnobWindowStart, " 3600 "}, func(c *ThemisConfig) { c.Start = 3600 }},
		{"busiest", []string{KnobWindowStart, "Busiest"}, func(c *ThemisConfig) {}},
		{"max job gpus", []string{KnobMaxJobGPUs, "8"}, func(c *ThemisConfig) { c.MaxJobGPUs = 8 }},
		{"gap", []string{KnobAppGap, "2m"}, func(c *ThemisConfig) { c.Gap = 120 }},
		{"sweep sizes", []string{KnobMinSweepJobs, "2", KnobMaxAppJobs, "64"}, func(c *ThemisConfig) { c.MinSweepJobs, c.MaxAppJobs = 2, 64 }},
		{"single fraction", []string{KnobSingleFraction, "0"}, func(c *ThemisConfig) { c.SingleFraction = 0 }},
		{"model mix", []string{KnobModelMix, "0.2, 0.4, 0.4"}, func(c *ThemisConfig) { c.Mix = ModelMix{0.2, 0.4, 0.4} }},
		{"max sweep", []string{KnobMaxSweep, "16"}, func(c *ThemisConfig) { c.MaxSweep = 16 }},
		{"phase iterations", []string{KnobPhaseIterations, "100"}, func(c *ThemisConfig) { c.PhaseIterations = 100 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ThemisFromKnobs(knobs(c.kv...))
			if err != nil {
				t.Fatal(err)
			}
			want := def
			c.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
	for _, c := range []struct{ key, val, want string }{
		{KnobSeed, "-1", `workload.seed = "-1"`},
		{KnobApps, "-1", `workload.apps = "-1": want a whole number from 0`},
		{KnobApps, "1.5", `workload.apps = "1.5"`},
		{KnobMaxJobs, "x", `workload.max_jobs = "x"`},
		{KnobWindow, "-1d", `workload.window = "-1d"`},
		{KnobWindow, "fortnight", `workload.window = "fortnight"`},
		{KnobWindowStart, "soon", `workload.window_start = "soon": want "busiest" or a duration`},
		{KnobMaxJobGPUs, "0", `workload.max_job_gpus = "0"`},
		{KnobAppGap, "-5", `workload.app_gap = "-5"`},
		{KnobMinSweepJobs, "0", `workload.min_sweep_jobs = "0"`},
		{KnobMaxAppJobs, "5", `max_app_jobs = 5: want a whole number from min_sweep_jobs (10)`},
		{KnobSingleFraction, "1", `workload.single_fraction = "1"`},
		{KnobModelMix, "0.1,0.6", `workload.model_mix = "0.1,0.6"`},
		{KnobModelMix, "0.1,0.6,0.4", `workload.model_mix = "0.1,0.6,0.4": want 3 shares`},
		{KnobModelMix, "-0.1,0.8,0.3", `workload.model_mix`},
		{KnobMaxSweep, "48", `max_sweep = 48: want a power of two`},
		{KnobMaxSweep, "2^20", `workload.max_sweep = "2^20"`},
		{KnobPhaseIterations, "0", `workload.phase_iterations = "0"`},
	} {
		_, err := ThemisFromKnobs(knobs(c.key, c.val))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: err %v, want %q", c.key, c.val, err, c.want)
		}
	}
	if len(ThemisKnobs) != 13 {
		t.Errorf("ThemisKnobs lists %d knobs", len(ThemisKnobs))
	}
}

// FitGpp's knobs and Themis's knobs share no name but the seed, and all
// have the workload. prefix.
func TestThemisKnobsApart(t *testing.T) {
	fit := map[string]bool{}
	for _, k := range Knobs {
		fit[k] = true
	}
	for _, k := range ThemisKnobs {
		if fit[k] != (k == KnobSeed) {
			t.Errorf("knob %s: shared with FitGpp = %v", k, fit[k])
		}
		if !strings.HasPrefix(k, "workload.") {
			t.Errorf("knob %s: want the workload. prefix", k)
		}
	}
}
