package workload

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The knobs FitGppFromKnobs reads ("--set workload.jobs=65536").
const (
	KnobJobs         = "workload.jobs"
	KnobSeed         = "workload.seed"
	KnobTEFraction   = "workload.te_fraction"
	KnobLoad         = "workload.load"
	KnobArrivals     = "workload.arrivals"
	KnobNodes        = "workload.nodes"
	KnobNodeCPUs     = "workload.node_cpus"
	KnobNodeMemoryGB = "workload.node_memory_gb"
	KnobNodeGPUs     = "workload.node_gpus"
	// KnobTEGPUs sets the mean (and standard deviation) of TE jobs' GPUs,
	// for a workload whose TE jobs do not fit the cluster's gaps as often.
	KnobTEGPUs = "workload.te_gpus"
	// KnobVCs spreads the jobs over virtual clusters (comma-separated
	// names): job i is in the (i mod n)-th.
	KnobVCs = "workload.vcs"
)

// Knobs lists the knobs FitGppFromKnobs reads, in the order of its doc.
var Knobs = []string{KnobJobs, KnobSeed, KnobTEFraction, KnobLoad, KnobArrivals,
	KnobNodes, KnobNodeCPUs, KnobNodeMemoryGB, KnobNodeGPUs, KnobTEGPUs, KnobVCs}

// FitGppFromKnobs builds a config from DefaultFitGppConfig and the knobs
// get returns (ok false: not set, keep the default):
//
//	workload.jobs            number of jobs, 1 to MaxJobs; "2^19" works too (default 2^19)
//	workload.seed            unsigned 64-bit seed (default 1)
//	workload.te_fraction     share of TE jobs, 0 to 1 (default 0.3)
//	workload.load            target load, positive (default 2.0)
//	workload.arrivals        "fifo" (the paper's, default) or "poisson"
//	workload.nodes           nodes in the cluster (default 84)
//	workload.node_cpus       CPUs per node (default 32)
//	workload.node_memory_gb  memory per node in GB (default 256)
//	workload.node_gpus       GPUs per node (default 8)
//	workload.te_gpus         mean (and standard deviation) of TE jobs' GPUs (default 1)
//	workload.vcs             virtual clusters, comma-separated: job i is in the (i mod n)-th (default: "default")
//
// The node knobs should describe the simulated cluster: the load refers to
// it, and every request is capped at its node. The classes' distributions'
// upper bounds follow a changed node shape. Errors name the knob and the
// value.
func FitGppFromKnobs(get func(key string) (string, bool)) (FitGppConfig, error) {
	cfg := DefaultFitGppConfig()
	bad := func(key, val, want string) error { return fmt.Errorf("%s = %q: want %s", key, val, want) }
	if v, ok := get(KnobJobs); ok {
		n, err := parseCount(v)
		if err != nil || n < 1 || n > MaxJobs {
			return cfg, bad(KnobJobs, v, fmt.Sprintf("a whole number from 1 to %d (or 2^k)", MaxJobs))
		}
		cfg.Jobs = n
	}
	if v, ok := get(KnobSeed); ok {
		s, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return cfg, bad(KnobSeed, v, "a whole number from 0 to 2^64-1")
		}
		cfg.Seed = s
	}
	if v, ok := get(KnobTEFraction); ok {
		f, err := parseNumber(v)
		if err != nil || f < 0 || f > 1 {
			return cfg, bad(KnobTEFraction, v, "a number from 0 to 1")
		}
		cfg.TEFraction = f
	}
	if v, ok := get(KnobLoad); ok {
		f, err := parseNumber(v)
		if err != nil || f <= 0 {
			return cfg, bad(KnobLoad, v, "a positive number")
		}
		cfg.Load = f
	}
	if v, ok := get(KnobArrivals); ok {
		a := strings.ToLower(strings.TrimSpace(v))
		if a != ArrivalsFIFO && a != ArrivalsPoisson {
			return cfg, bad(KnobArrivals, v, fmt.Sprintf("%q or %q", ArrivalsFIFO, ArrivalsPoisson))
		}
		cfg.Arrivals = a
	}
	for _, k := range []struct {
		key   string
		whole bool
		set   func(float64)
	}{
		{KnobNodes, true, func(v float64) { cfg.Cluster.Nodes = int(v) }},
		{KnobNodeCPUs, false, func(v float64) { cfg.Cluster.Node.CPUs = v }},
		{KnobNodeMemoryGB, false, func(v float64) { cfg.Cluster.Node.MemoryGB = v }},
		{KnobNodeGPUs, true, func(v float64) { cfg.Cluster.Node.GPUs = int(v) }},
		{KnobTEGPUs, false, func(v float64) { cfg.TE.GPUs.Mean, cfg.TE.GPUs.SD = v, v }},
	} {
		v, ok := get(k.key)
		if !ok {
			continue
		}
		f, err := parseNumber(v)
		if k.whole {
			n, cerr := parseCount(v)
			f, err = float64(n), cerr
			if err == nil && (n < 1 || n > 1<<20) {
				err = fmt.Errorf("out of range")
			}
			if err != nil {
				return cfg, bad(k.key, v, "a whole number from 1 to 2^20")
			}
		} else if err != nil || f <= 0 {
			return cfg, bad(k.key, v, "a positive number")
		}
		k.set(f)
	}
	if v, ok := get(KnobVCs); ok {
		cfg.VCs = nil
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				return cfg, bad(KnobVCs, v, "virtual cluster names, comma-separated")
			}
			cfg.VCs = append(cfg.VCs, name)
		}
	}
	// Requests are capped at the node: keep the default bounds at its
	// capacity when the node changes.
	for _, p := range []*ClassParams{&cfg.TE, &cfg.BE} {
		p.CPUs.Hi = math.Floor(cfg.Cluster.Node.CPUs)
		p.MemoryGB.Hi = math.Floor(cfg.Cluster.Node.MemoryGB)
		p.GPUs.Hi = float64(cfg.Cluster.Node.GPUs)
	}
	if _, _, _, err := cfg.samplers(); err != nil {
		return cfg, fmt.Errorf("workload knobs: %w", err)
	}
	return cfg, nil
}

// parseNumber reads a finite number.
func parseNumber(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return f, nil
}

// parseCount reads a whole number, written out or as a power of two "2^k"
// (the paper's 2^19).
func parseCount(s string) (int, error) {
	s = strings.TrimSpace(s)
	if base, exp, ok := strings.Cut(s, "^"); ok {
		e, err := strconv.Atoi(strings.TrimSpace(exp))
		if strings.TrimSpace(base) != "2" || err != nil || e < 0 || e > 40 {
			return 0, fmt.Errorf("%q: want 2^k with k from 0 to 40", s)
		}
		return 1 << e, nil
	}
	return strconv.Atoi(s)
}

// The knobs ThemisFromKnobs reads, besides KnobSeed ("--set
// workload.apps=50").
const (
	KnobApps            = "workload.apps"
	KnobMaxJobs         = "workload.max_jobs"
	KnobWindow          = "workload.window"
	KnobWindowStart     = "workload.window_start"
	KnobMaxJobGPUs      = "workload.max_job_gpus"
	KnobAppGap          = "workload.app_gap"
	KnobMinSweepJobs    = "workload.min_sweep_jobs"
	KnobMaxAppJobs      = "workload.max_app_jobs"
	KnobSingleFraction  = "workload.single_fraction"
	KnobModelMix        = "workload.model_mix"
	KnobMaxSweep        = "workload.max_sweep"
	KnobPhaseIterations = "workload.phase_iterations"
)

// ThemisKnobs lists the knobs ThemisFromKnobs reads, in the order of its
// doc.
var ThemisKnobs = []string{KnobSeed, KnobApps, KnobMaxJobs, KnobWindow, KnobWindowStart,
	KnobMaxJobGPUs, KnobAppGap, KnobMinSweepJobs, KnobMaxAppJobs, KnobSingleFraction,
	KnobModelMix, KnobMaxSweep, KnobPhaseIterations}

// ThemisFromKnobs builds a config for ThemisW1 and ThemisW2 from
// DefaultThemisConfig and the knobs get returns (ok false: not set, keep the
// default). Durations are seconds ("3600"), days ("14d") or Go durations
// ("336h", "90s").
//
//	workload.seed              unsigned 64-bit seed (default 1)
//	workload.apps              keep the first N apps by arrival; 0 all (default 0)
//	workload.max_jobs          keep the first apps with at most N Workload 1 jobs in all; 0 no bound (default 0)
//	workload.window            snapshot length; 0 the rest of the trace (default 14d)
//	workload.window_start      "busiest" (default), or the snapshot's start after the trace's first submission
//	workload.max_job_gpus      drop jobs of more GPUs (default 2)
//	workload.app_gap           most time between a burst's consecutive submissions (default 60s)
//	workload.min_sweep_jobs    fewest jobs of a sweep app (default 10)
//	workload.max_app_jobs      most jobs of an app; longer bursts are split (default 100)
//	workload.single_fraction   share of single-job apps, 0 to below 1 (default 0.1)
//	workload.model_mix         "cv,nlp,speech" shares summing to 1 (default "0.1,0.6,0.3")
//	workload.max_sweep         Workload 2: most initial trials, a power of two (default 64)
//	workload.phase_iterations  Workload 2: a first-phase job's iterations (default 1000)
//
// Errors name the knob and the value.
func ThemisFromKnobs(get func(key string) (string, bool)) (ThemisConfig, error) {
	cfg := DefaultThemisConfig()
	bad := func(key, val, want string) error { return fmt.Errorf("%s = %q: want %s", key, val, want) }
	if v, ok := get(KnobSeed); ok {
		s, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return cfg, bad(KnobSeed, v, "a whole number from 0 to 2^64-1")
		}
		cfg.Seed = s
	}
	for _, k := range []struct {
		key    string
		lo, hi int
		dst    *int
	}{
		{KnobApps, 0, math.MaxInt32, &cfg.Apps},
		{KnobMaxJobs, 0, math.MaxInt32, &cfg.MaxJobs},
		{KnobMaxJobGPUs, 1, math.MaxInt32, &cfg.MaxJobGPUs},
		{KnobMinSweepJobs, 1, MaxThemisAppJobs, &cfg.MinSweepJobs},
		{KnobMaxAppJobs, 1, MaxThemisAppJobs, &cfg.MaxAppJobs},
		{KnobMaxSweep, 1, MaxThemisSweep, &cfg.MaxSweep},
		{KnobPhaseIterations, 1, MaxPhaseIterations, &cfg.PhaseIterations},
	} {
		v, ok := get(k.key)
		if !ok {
			continue
		}
		n, err := parseCount(v)
		if err != nil || n < k.lo || n > k.hi {
			return cfg, bad(k.key, v, fmt.Sprintf("a whole number from %d to %d", k.lo, k.hi))
		}
		*k.dst = n
	}
	if v, ok := get(KnobWindow); ok {
		s, err := parseSeconds(v)
		if err != nil {
			return cfg, bad(KnobWindow, v, `a duration >= 0 ("14d", "336h", "3600"); 0 is the rest of the trace`)
		}
		cfg.Window = s
	}
	if v, ok := get(KnobWindowStart); ok {
		if strings.EqualFold(strings.TrimSpace(v), "busiest") {
			cfg.Start = StartBusiest
		} else {
			s, err := parseSeconds(v)
			if err != nil {
				return cfg, bad(KnobWindowStart, v, `"busiest" or a duration >= 0 after the trace's first submission ("34d", "3600")`)
			}
			cfg.Start = s
		}
	}
	if v, ok := get(KnobAppGap); ok {
		s, err := parseSeconds(v)
		if err != nil {
			return cfg, bad(KnobAppGap, v, `a duration >= 0 ("60", "2m")`)
		}
		cfg.Gap = s
	}
	if v, ok := get(KnobSingleFraction); ok {
		f, err := parseNumber(v)
		if err != nil || f < 0 || f >= 1 {
			return cfg, bad(KnobSingleFraction, v, "a number from 0 to below 1")
		}
		cfg.SingleFraction = f
	}
	if v, ok := get(KnobModelMix); ok {
		parts := strings.Split(v, ",")
		var f [3]float64
		var err error
		if len(parts) != 3 {
			err = errors.New("want 3 shares")
		}
		for i := 0; err == nil && i < 3; i++ {
			f[i], err = parseNumber(parts[i])
			if err == nil && f[i] < 0 {
				err = errors.New("negative share")
			}
		}
		if err != nil || math.Abs(f[0]+f[1]+f[2]-1) > 1e-6 {
			return cfg, bad(KnobModelMix, v, `3 shares >= 0, "cv,nlp,speech", that sum to 1 (the paper's "0.1,0.6,0.3")`)
		}
		cfg.Mix = ModelMix{CV: f[0], NLP: f[1], Speech: f[2]}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("workload knobs: %w", err)
	}
	return cfg, nil
}

// parseSeconds reads a duration >= 0 in seconds: a number of seconds
// ("3600"), of days ("14d") or a Go duration ("336h", "1h30m").
func parseSeconds(s string) (float64, error) {
	s = strings.TrimSpace(s)
	var f float64
	if d, ok := strings.CutSuffix(s, "d"); ok {
		days, err := parseNumber(d)
		if err != nil {
			return 0, err
		}
		f = days * Day
	} else if n, err := parseNumber(s); err == nil {
		f = n
	} else {
		dur, err := time.ParseDuration(s)
		if err != nil {
			return 0, err
		}
		f = dur.Seconds()
	}
	if f < 0 || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q: want a duration >= 0", s)
	}
	return f, nil
}
