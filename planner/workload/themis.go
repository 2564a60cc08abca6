package workload

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/trace"
)

// The Themis paper's workloads (Mahajan et al., "Themis: Fair and Efficient
// GPU Cluster Scheduling", NSDI'20, section 6.1; papers/themis-nsdi20.txt):
//
//   - Workload 1: "a two week snapshot" of the Microsoft Philly trace,
//     "focus[ed] on [the] subset of jobs ... that correspond to
//     hyper-parameter exploration jobs triggered by Hyperdrive", whose jobs
//     "are either 1 or 2 GPU jobs" (section 6.2.1). ThemisW1.
//   - Workload 2: "the app arrival times from Workload 1, ... jobs per app
//     [from] the successive halving pattern characteristic of the Hyperband
//     algorithm, and ... [more] tasks per job". ThemisW2.
//
// Both draw each app's model from Table 4's mix (ThemisModels). The
// published trace (traces/philly.csv) has no users, no job names and no
// Hyperdrive tag, so the apps are recovered from submission bursts; see
// ThemisW1. The paper's cluster is cluster.Preset("themis").

// The Formats of the traces ThemisW1 and ThemisW2 generate.
const (
	FormatThemisW1 = "themis-w1"
	FormatThemisW2 = "themis-w2"
)

// The model categories of the Themis paper's Table 4.
const (
	CategoryCV     = "cv"
	CategoryNLP    = "nlp"
	CategorySpeech = "speech"
)

// ThemisModel is one model of the Themis paper's Table 4.
type ThemisModel struct {
	// Name is what the generated jobs carry as Model: the model's name in
	// planner/sim's placement-sensitivity classes where it has one, else
	// the paper's name prefixed with the category, which those classes
	// also recognise.
	Name string
	// Paper is the name in Table 4.
	Paper string
	// Category is CategoryCV, CategoryNLP or CategorySpeech.
	Category string
	// Dataset is Table 4's dataset.
	Dataset string
}

// ThemisModels are the Themis paper's Table 4, in its order: the models of
// each category, after Gandiva ("We use the same mix of models for each
// category as outlined in Gandiva", section 6.1). Within a category an app
// draws each model with equal probability (the paper gives no weights), so
// 3 of the 5 CV models are the placement-sensitive VGG16, VGG19 and AlexNet.
// The names map onto planner/sim's model classes (sim/models.go):
//
//	Table 4         Name            sim class (slowdown across machines / racks)
//	Inception-v3    inception3      cv      (1.1 / 1.3)
//	AlexNet         alexnet         cv-high (1.2 / 1.6)
//	ResNet50        resnet50        cv      (1.1 / 1.3)
//	VGG16           vgg16           cv-high (1.2 / 1.6)
//	VGG19           vgg19           cv-high (1.2 / 1.6)
//	Bi-Att-Flow     nlp-bidaf       nlp     (1.1 / 1.3)   no sim name: "nlp-" prefix
//	LangModel       lstm            nlp     (1.1 / 1.3)   the PTB LSTM language model
//	GNMT            gnmt            nlp     (1.1 / 1.3)
//	Transformer     transformer     nlp     (1.1 / 1.3)
//	WaveNet         speech-wavenet  speech  (1.05 / 1.15) no sim name: "speech-" prefix
//	DeepSpeech      deepspeech      speech  (1.05 / 1.15)
var ThemisModels = []ThemisModel{
	{"inception3", "Inception-v3", CategoryCV, "ImageNet"},
	{"alexnet", "AlexNet", CategoryCV, "ImageNet"},
	{"resnet50", "ResNet50", CategoryCV, "ImageNet"},
	{"vgg16", "VGG16", CategoryCV, "ImageNet"},
	{"vgg19", "VGG19", CategoryCV, "ImageNet"},
	{"nlp-bidaf", "Bi-Att-Flow", CategoryNLP, "SQuAD"},
	{"lstm", "LangModel", CategoryNLP, "PTB"},
	{"gnmt", "GNMT", CategoryNLP, "WMT16"},
	{"transformer", "Transformer", CategoryNLP, "WMT16"},
	{"speech-wavenet", "WaveNet", CategorySpeech, "VCTK"},
	{"deepspeech", "DeepSpeech", CategorySpeech, "CommonVoice"},
}

// ThemisCategory is the Table 4 category of a model Name of ThemisModels,
// "" for other names.
func ThemisCategory(model string) string {
	for _, m := range ThemisModels {
		if m.Name == model {
			return m.Category
		}
	}
	return ""
}

// ModelMix is the share of apps in each model category.
type ModelMix struct {
	CV, NLP, Speech float64
}

// ThemisMix is the paper's mix (section 6.1, Table 4): "computer vision
// (CV - 10%), natural language processing (NLP - 60%) and speech (Speech -
// 30%)".
var ThemisMix = ModelMix{CV: 0.1, NLP: 0.6, Speech: 0.3}

// StartBusiest is the ThemisConfig.Start that picks the busiest window.
const StartBusiest = -1.0

// Day is a day in seconds.
const Day = 24 * hour

// Bounds on the counts of ThemisConfig, so that no knob can make a job
// demand or an iteration count overflow.
const (
	// MaxThemisAppJobs bounds MaxAppJobs and MinSweepJobs.
	MaxThemisAppJobs = 1 << 16
	// MaxThemisSweep bounds MaxSweep (a power of two).
	MaxThemisSweep = 1 << 16
	// MaxPhaseIterations bounds PhaseIterations.
	MaxPhaseIterations = 1 << 30
)

// ThemisConfig parametrises ThemisW1 and ThemisW2; start from
// DefaultThemisConfig. The same config and trace give the same workload.
// The fields are applied in this order: window, job filter, grouping into
// bursts and apps, single-job sampling, models, then Apps and MaxJobs.
type ThemisConfig struct {
	// Seed draws the apps' models and the sampled single-job apps.
	Seed uint64
	// Start is where the snapshot starts, in seconds after the trace's
	// first submission, or StartBusiest (the default): the day-aligned
	// window (a whole number of days after the first submission) holding
	// the most jobs, the earliest of equals.
	Start float64
	// Window is the snapshot's length in seconds; 0 takes the trace from
	// Start to its end. Default: two weeks, the paper's "two week snapshot"
	// (section 6.1).
	Window float64
	// MaxJobGPUs drops jobs of more GPUs. Default 2: the paper's Workload 1
	// "jobs are either 1 or 2 GPU jobs" (section 6.2.1).
	MaxJobGPUs int
	// Gap, in seconds, bounds the time between consecutive submissions of
	// one burst (see ThemisW1). Default 60.
	Gap float64
	// MinSweepJobs is the fewest jobs of a burst that makes it a
	// hyper-parameter sweep app. Default 10 (section 2.2: sweeps explore
	// "from a few tens to about a hundred" hyper-parameters). 1 makes every
	// burst an app, and SingleFraction is then not used.
	MinSweepJobs int
	// MaxAppJobs is the most jobs of an app: a longer burst is split into
	// consecutive apps of nearly equal size. Default 100 (section 2.2,
	// Figure 2: "as many as 100 jobs").
	MaxAppJobs int
	// SingleFraction is the share of single-job apps: single-job bursts are
	// sampled (seeded) to make this share of the apps, if there are enough.
	// Default 0.1 (section 2.2, Figure 2: "~10% of the apps have 1 job").
	// 0 keeps sweeps only; at most just below 1.
	SingleFraction float64
	// Mix is the share of apps per model category (default ThemisMix); it
	// must sum to 1.
	Mix ModelMix
	// Apps keeps only the first Apps apps by arrival; 0 keeps all.
	Apps int
	// MaxJobs keeps the first apps by arrival whose Workload 1 jobs number
	// at most MaxJobs together (apps are kept whole, ThemisW2 selects the
	// same apps); 0: no bound.
	MaxJobs int
	// MaxSweep caps a Workload 2 app's initial job count n, a power of two
	// (ThemisW2). Default 64, the largest power of two <= MaxAppJobs.
	MaxSweep int
	// PhaseIterations is a Workload 2 first-phase job's iteration count;
	// phase p's jobs run PhaseIterations x 2^(p-1) (ThemisW2). Default 1000.
	PhaseIterations int
}

// DefaultThemisConfig is the paper's Workload 1 and 2 as this package reads
// section 6.1 (see ThemisConfig's fields for each value's source).
func DefaultThemisConfig() ThemisConfig {
	return ThemisConfig{
		Seed:            1,
		Start:           StartBusiest,
		Window:          14 * Day,
		MaxJobGPUs:      2,
		Gap:             60,
		MinSweepJobs:    10,
		MaxAppJobs:      100,
		SingleFraction:  0.1,
		Mix:             ThemisMix,
		MaxSweep:        64,
		PhaseIterations: 1000,
	}
}

// Validate checks every field.
func (cfg ThemisConfig) Validate() error {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	m := cfg.Mix
	sum := m.CV + m.NLP + m.Speech
	switch {
	case !finite(cfg.Start) || (cfg.Start < 0 && cfg.Start != StartBusiest):
		return fmt.Errorf("window start = %g s: want a number of seconds >= 0, or StartBusiest", cfg.Start)
	case !finite(cfg.Window) || cfg.Window < 0:
		return fmt.Errorf("window = %g s: want a number of seconds >= 0 (0: to the end of the trace)", cfg.Window)
	case cfg.MaxJobGPUs < 1:
		return fmt.Errorf("max_job_gpus = %d: want at least 1", cfg.MaxJobGPUs)
	case !finite(cfg.Gap) || cfg.Gap < 0:
		return fmt.Errorf("app_gap = %g s: want a number of seconds >= 0", cfg.Gap)
	case cfg.MinSweepJobs < 1 || cfg.MinSweepJobs > MaxThemisAppJobs:
		return fmt.Errorf("min_sweep_jobs = %d: want a whole number from 1 to %d", cfg.MinSweepJobs, MaxThemisAppJobs)
	case cfg.MaxAppJobs < cfg.MinSweepJobs || cfg.MaxAppJobs > MaxThemisAppJobs:
		return fmt.Errorf("max_app_jobs = %d: want a whole number from min_sweep_jobs (%d) to %d", cfg.MaxAppJobs, cfg.MinSweepJobs, MaxThemisAppJobs)
	case !(cfg.SingleFraction >= 0 && cfg.SingleFraction < 1):
		return fmt.Errorf("single_fraction = %g: want a number from 0 to below 1", cfg.SingleFraction)
	case !(m.CV >= 0 && m.NLP >= 0 && m.Speech >= 0) || !finite(sum) || math.Abs(sum-1) > 1e-6:
		return fmt.Errorf("model mix %g,%g,%g (cv, nlp, speech): want shares >= 0 that sum to 1", m.CV, m.NLP, m.Speech)
	case cfg.Apps < 0:
		return fmt.Errorf("apps = %d: want 0 (all) or more", cfg.Apps)
	case cfg.MaxJobs < 0:
		return fmt.Errorf("max_jobs = %d: want 0 (no bound) or more", cfg.MaxJobs)
	case cfg.MaxSweep < 1 || cfg.MaxSweep > MaxThemisSweep || cfg.MaxSweep&(cfg.MaxSweep-1) != 0:
		return fmt.Errorf("max_sweep = %d: want a power of two from 1 to %d", cfg.MaxSweep, MaxThemisSweep)
	case cfg.PhaseIterations < 1 || cfg.PhaseIterations > MaxPhaseIterations:
		return fmt.Errorf("phase_iterations = %d: want a whole number from 1 to %d", cfg.PhaseIterations, MaxPhaseIterations)
	}
	return nil
}

// Random streams of the Themis workloads (see stream).
const (
	streamThemisModel uint64 = iota + 0x7468656d69730000 // "themis"
	streamThemisSingles
)

// themisApp is one app of Workload 1: its jobs, as indices into the input
// trace's Jobs in submission order, and its model.
type themisApp struct {
	id    string
	jobs  []int
	model string
}

// themisSelection is the apps ThemisW1 and ThemisW2 share, and the
// submission time that becomes 0.
type themisSelection struct {
	apps   []themisApp
	origin float64
	start  time.Time
}

// ThemisW1 generates the Themis paper's Workload 1 (section 6.1) from a
// trace (philly.csv): apps of related jobs, each job a job of the trace.
//
// The paper takes "a two week snapshot" and the jobs "that correspond to
// hyper-parameter exploration jobs triggered by Hyperdrive". The published
// trace has no user, job name or framework, so the sweeps are recovered from
// how a tuning framework submits them: its trials of one model arrive
// together, from one tenant, each with the same gang size. Steps:
//
//  1. Snapshot: the jobs submitted in [Start, Start+Window) (Start
//     StartBusiest: the busiest day-aligned window). Jobs of more than
//     MaxJobGPUs GPUs are dropped (section 6.2.1: Workload 1's "jobs are
//     either 1 or 2 GPU jobs").
//  2. Bursts: in submission order, a job joins the open burst of its (VC,
//     GPUs) if it was submitted at most Gap seconds after that burst's
//     latest job, else it opens a new one. Jobs of other VCs or sizes may
//     interleave. (Philly's submissions from one VC and size are mostly
//     seconds apart, then there is a mode at 10 minutes that is one VC's
//     periodic submissions, not a sweep; Gap 60 s keeps those apart.)
//  3. Apps: a burst of more than MaxAppJobs jobs is split into
//     ceil(len/MaxAppJobs) consecutive apps of nearly equal size (the
//     paper's sweeps have "as many as 100 jobs"). An app of at least
//     MinSweepJobs jobs is a sweep; one of 1 job (an isolated submission)
//     is a single-job app; apps of 2 to MinSweepJobs-1 jobs are dropped as
//     neither. All sweeps are kept and the single-job apps are sampled,
//     seeded, to make SingleFraction of the apps (section 2.2, Figure 2:
//     ~10% single-job apps; the rest sweeps of a few tens to 100 jobs,
//     median 75). On philly.csv the defaults keep, from the two busiest
//     weeks (from 2017-10-08 12:04:50 UTC, 34 days after the first
//     submission), 330 sweeps (median 80 jobs) and 37 single-job apps:
//     21,902 jobs, all but 25 of 1 GPU, 1.1e8 GPU-seconds (36% of 256 GPUs
//     over two weeks); Workload 2 makes them 31,659 jobs of 1 to 64 GPUs.
//  4. Models: in arrival order (the first job's submission) each app gets
//     a model: a category from Mix, then one of the category's
//     ThemisModels with equal probability. Every job of an app trains that
//     model.
//  5. Subset: the first Apps apps, then the first apps whose jobs number
//     at most MaxJobs. Both keep a prefix, so a small run is the start of
//     the full workload: the same apps, IDs and models.
//
// The result has the kept jobs of the kept apps, unchanged (Line, ID,
// Duration, GPUs, VC, and any other field) except: App is the app's ID,
// "app-0001" on in arrival order; Model is the app's model (a Model in the
// input is overwritten); Phase is 0 (a Hyperdrive sweep stops trials by
// their performance curves, section 4.3.2, not in phases); Submit is
// re-based so that the first kept job is at 0, and Start moves with it.
// Jobs stay in submission order. The trace is named
// "<input>-themis-w1-seed<seed>".
func ThemisW1(tr *trace.Trace, cfg ThemisConfig) (*trace.Trace, error) {
	sel, err := themisSelect(tr, cfg)
	if err != nil {
		return nil, fmt.Errorf("themis workload 1: %w", err)
	}
	n := 0
	for _, a := range sel.apps {
		n += len(a.jobs)
	}
	type ref struct{ app, job int }
	refs := make([]ref, 0, n)
	for ai, a := range sel.apps {
		for _, j := range a.jobs {
			refs = append(refs, ref{ai, j})
		}
	}
	// Submission order is the input's order of indices (see themisSelect).
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(a.job, b.job) })
	jobs := make([]trace.Job, len(refs))
	for i, r := range refs {
		j := tr.Jobs[r.job]
		a := &sel.apps[r.app]
		j.App, j.Model, j.Phase = a.id, a.model, 0
		j.Submit -= sel.origin
		jobs[i] = j
	}
	return &trace.Trace{
		Name:   themisName(tr, "w1", cfg.Seed),
		Format: FormatThemisW1,
		Jobs:   jobs,
		Start:  sel.start,
	}, nil
}

// ThemisW2 generates the Themis paper's Workload 2 (section 6.1) from a
// trace: the apps of ThemisW1(tr, cfg), with the same IDs, arrivals, VCs and
// models, each turned into a successive-halving sweep (section 4.3.2, the
// pattern of Hyperband).
//
// For a Workload 1 app of k jobs of g GPUs each whose jobs ran for
// GPU-seconds B in all (the sum of GPUs x Duration, the app's budget of
// Equation 2):
//
//   - n = min(the largest power of two <= k, MaxSweep) trials start;
//     halving then runs P = log2(n)+1 phases of n, n/2, ..., 1 jobs (the
//     paper's "log2 n phases" counts the halvings; its example, n = 4, has
//     the 3 phases 4, 2, 1). A single-job app has one phase of one job.
//   - Phase p's jobs ask for g x 2^(p-1) GPUs each: "each one is submitted
//     as a job with a demand of 1 GPU ... the best n/2 ... are assigned a
//     maximum demand of 2 GPUs ... until we are left with 1 job with a
//     maximum demand of n GPUs" (section 4.3.2), the demand of the app's
//     Workload 1 jobs (g = 1 or 2) being the first phase's. So every phase
//     asks for n x g GPUs, and the last job for n x g (up to 128 by
//     default): Workload 2's "[more] tasks per job".
//   - The budget is divided evenly across the phases ("To evenly divide the
//     budget across the phases", the example of section 4.3.3, and
//     Hyperband): each phase does B/P GPU-seconds of work, split evenly
//     among its jobs, so a phase-p job does B x 2^(p-1) / (P x n)
//     GPU-seconds and runs for Duration = B / (P x n x g) seconds on its
//     g x 2^(p-1) GPUs, the same in every phase. Its Iterations are
//     PhaseIterations x 2^(p-1) (iterations double as the work per job
//     does; the serial iteration time, GPUs x Duration / Iterations, is the
//     same for all the app's jobs, as the example's median estimate
//     assumes). The app's work is B, as in Workload 1. (Section 4.3.2's
//     text instead runs every phase "for the same number of iterations I";
//     we follow the example and Hyperband.)
//
// Each job is a trace.Job with App the app's ID, Phase p, GPUs, Duration
// and Iterations as above, the app's VC and Model, and Submit the app's
// arrival (its first Workload 1 job's submission, re-based as in
// ThemisW1): a consumer must hold a phase-p job back until every job of
// phase p-1 of its app has finished. Trials are numbered from 0, and the
// survivors of each phase are, by convention, its lowest-numbered trials:
// job IDs are "<app>-p<phase>-t<trial>", so "app-0001-p2-t0" continues
// trial 0 of phase 1. Line is the job's position + 1 (as if the trace were
// a file with a header), in app order, then phase, then trial; jobs are
// sorted by Submit, ties by Line. Other fields are zero. The app selection
// (Apps, MaxJobs) is Workload 1's, so a Workload 2 trace has at most
// 2 x MaxJobs jobs. The trace is named "<input>-themis-w2-seed<seed>".
func ThemisW2(tr *trace.Trace, cfg ThemisConfig) (*trace.Trace, error) {
	sel, err := themisSelect(tr, cfg)
	if err != nil {
		return nil, fmt.Errorf("themis workload 2: %w", err)
	}
	var jobs []trace.Job
	for _, a := range sel.apps {
		first := tr.Jobs[a.jobs[0]]
		g := first.GPUs
		budget := 0.0
		for _, j := range a.jobs {
			budget += float64(tr.Jobs[j].GPUs) * tr.Jobs[j].Duration
		}
		n := min(1<<(bits.Len(uint(len(a.jobs)))-1), cfg.MaxSweep)
		phases := bits.Len(uint(n)) // log2(n) + 1
		dur := budget / float64(phases*n*g)
		for p := 1; p <= phases; p++ {
			for t := range n >> (p - 1) {
				jobs = append(jobs, trace.Job{
					Line:       len(jobs) + 2,
					ID:         a.id + "-p" + strconv.Itoa(p) + "-t" + strconv.Itoa(t),
					Submit:     first.Submit - sel.origin,
					Duration:   dur,
					GPUs:       g << (p - 1),
					VC:         first.VC,
					Model:      a.model,
					Iterations: cfg.PhaseIterations << (p - 1),
					App:        a.id,
					Phase:      p,
				})
			}
		}
	}
	return &trace.Trace{
		Name:   themisName(tr, "w2", cfg.Seed),
		Format: FormatThemisW2,
		Jobs:   jobs,
		Start:  sel.start,
	}, nil
}

func themisName(tr *trace.Trace, w string, seed uint64) string {
	base := strings.TrimSuffix(tr.Name, filepath.Ext(tr.Name))
	if base == "" {
		base = "trace"
	}
	return fmt.Sprintf("%s-themis-%s-seed%d", base, w, seed)
}

// themisSelect forms, samples and truncates the apps (ThemisW1's steps).
// App job indices are into tr.Jobs; tr.Jobs must be sorted by Submit, ties
// by Line (trace.Trace's order), so that index order is submission order.
func themisSelect(tr *trace.Trace, cfg ThemisConfig) (themisSelection, error) {
	var sel themisSelection
	if err := cfg.Validate(); err != nil {
		return sel, err
	}
	if tr == nil || len(tr.Jobs) == 0 {
		return sel, errors.New("the trace has no jobs")
	}
	if !slices.IsSortedFunc(tr.Jobs, func(a, b trace.Job) int {
		return cmp.Or(cmp.Compare(a.Submit, b.Submit), cmp.Compare(a.Line, b.Line))
	}) {
		return sel, errors.New("the trace's jobs are not sorted by submission time, then line")
	}

	// 1. Snapshot and job filter.
	start := cfg.Start
	if start == StartBusiest {
		start = busiestStart(tr.Jobs, cfg.Window)
	}
	end := math.Inf(1)
	if cfg.Window > 0 {
		end = start + cfg.Window
	}

	// 2. Bursts per (VC, GPUs).
	type key struct {
		vc   string
		gpus int
	}
	open := map[key]int{}
	var bursts [][]int
	for i := range tr.Jobs {
		j := &tr.Jobs[i]
		if j.GPUs < 1 {
			return sel, fmt.Errorf("job %s asks for %d GPUs: want at least 1", j.ID, j.GPUs)
		}
		if j.Submit < start || j.Submit >= end || j.GPUs > cfg.MaxJobGPUs {
			continue
		}
		k := key{j.VC, j.GPUs}
		if b, ok := open[k]; ok && j.Submit-tr.Jobs[bursts[b][len(bursts[b])-1]].Submit <= cfg.Gap {
			bursts[b] = append(bursts[b], i)
			continue
		}
		open[k] = len(bursts)
		bursts = append(bursts, []int{i})
	}
	if len(bursts) == 0 {
		return sel, fmt.Errorf("no job of at most %d GPUs was submitted in [%g s, %g s) of the trace", cfg.MaxJobGPUs, start, end)
	}

	// 3. Apps: split long bursts, keep sweeps, sample single-job apps.
	var sweeps, singles [][]int
	for _, b := range bursts {
		parts := (len(b) + cfg.MaxAppJobs - 1) / cfg.MaxAppJobs
		for p := range parts {
			app := b[p*len(b)/parts : (p+1)*len(b)/parts]
			switch {
			case len(app) >= cfg.MinSweepJobs:
				sweeps = append(sweeps, app)
			case len(app) == 1:
				singles = append(singles, app)
			}
		}
	}
	want := 0
	if f := cfg.SingleFraction; f > 0 {
		want = min(len(singles), int(math.Round(f/(1-f)*float64(len(sweeps)))))
	}
	groups := sweeps
	if want > 0 {
		// A partial Fisher-Yates shuffle picks want of them.
		r := stream(cfg.Seed, streamThemisSingles)
		idx := make([]int, len(singles))
		for i := range idx {
			idx[i] = i
		}
		for i := range want {
			k := i + r.IntN(len(idx)-i)
			idx[i], idx[k] = idx[k], idx[i]
		}
		for _, i := range idx[:want] {
			groups = append(groups, singles[i])
		}
	}
	if len(groups) == 0 {
		return sel, fmt.Errorf("no app in [%g s, %g s) of the trace: %d bursts of jobs, none of %d to %d jobs (a sweep), and single_fraction %g samples no single-job app without sweeps",
			start, end, len(bursts), cfg.MinSweepJobs, cfg.MaxAppJobs, cfg.SingleFraction)
	}
	sort.Slice(groups, func(a, b int) bool { return groups[a][0] < groups[b][0] })

	// 4. Models, in arrival order, for all apps (so a subset keeps them).
	width := max(4, len(strconv.Itoa(len(groups))))
	r := stream(cfg.Seed, streamThemisModel)
	apps := make([]themisApp, len(groups))
	for i, g := range groups {
		apps[i] = themisApp{
			id:    fmt.Sprintf("app-%0*d", width, i+1),
			jobs:  g,
			model: cfg.Mix.draw(r.Float64(), r.Float64()),
		}
	}

	// 5. Subset.
	if cfg.Apps > 0 && cfg.Apps < len(apps) {
		apps = apps[:cfg.Apps]
	}
	if cfg.MaxJobs > 0 {
		n, keep := 0, 0
		for keep < len(apps) && n+len(apps[keep].jobs) <= cfg.MaxJobs {
			n += len(apps[keep].jobs)
			keep++
		}
		if keep == 0 {
			return sel, fmt.Errorf("max_jobs = %d: the first app (%s) alone has %d jobs", cfg.MaxJobs, apps[0].id, len(apps[0].jobs))
		}
		apps = apps[:keep]
	}
	sel.apps = apps
	sel.origin = tr.Jobs[apps[0].jobs[0]].Submit
	if !tr.Start.IsZero() {
		sel.start = tr.Start.Add(time.Duration(math.Round(sel.origin * float64(time.Second))))
	}
	return sel, nil
}

// draw picks a model: u chooses the category by the mix, v the model within
// it, each of the category's models equally likely. u and v are in [0, 1).
func (m ModelMix) draw(u, v float64) string {
	cat := CategorySpeech
	switch {
	case u < m.CV:
		cat = CategoryCV
	case u < m.CV+m.NLP:
		cat = CategoryNLP
	case m.Speech == 0: // rounding: the shares sum to just below 1
		cat = CategoryNLP
		if m.NLP == 0 {
			cat = CategoryCV
		}
	}
	var names []string
	for _, mod := range ThemisModels {
		if mod.Category == cat {
			names = append(names, mod.Name)
		}
	}
	return names[min(int(v*float64(len(names))), len(names)-1)]
}

// busiestStart is the start, a whole number of days after Submit 0, of the
// window of the given length holding the most jobs, the earliest of equals;
// 0 when window is 0 (the whole trace). jobs are sorted by Submit. Only days
// on which some job was submitted can start the busiest window.
func busiestStart(jobs []trace.Job, window float64) float64 {
	if window == 0 {
		return 0
	}
	best, bestN := 0.0, -1
	lastDay := math.Inf(-1)
	for i := range jobs {
		d := math.Floor(jobs[i].Submit/Day) * Day
		if d == lastDay {
			continue
		}
		lastDay = d
		lo := i // the first job at or after d is job i (sorted, same day)
		hi := sort.Search(len(jobs), func(k int) bool { return jobs[k].Submit >= d+window })
		if hi-lo > bestN {
			best, bestN = d, hi-lo
		}
	}
	return best
}
