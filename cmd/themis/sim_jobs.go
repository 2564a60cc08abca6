package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/trace"
	"github.com/themis-nomad/themis/planner/workload"
)

// The jobs themis sim replays: a trace, or a generated workload.

// loadJobs loads the trace, or generates the workload from its knobs.
func loadJobs(o simOptions, knobs core.Knobs) (*trace.Trace, error) {
	if o.workload == "" {
		return trace.Load(o.trace)
	}
	switch o.workload {
	case workload.FormatThemisW1, workload.FormatThemisW2:
		cfg, err := workload.ThemisFromKnobs(func(key string) (string, bool) {
			if knobs.Has(key) {
				return knobs.String(key, ""), true
			}
			return "", false
		})
		if err != nil {
			return nil, err
		}
		src := o.trace
		if src == "" {
			src = defaultPhilly()
		}
		tr, err := trace.Load(src)
		if err != nil {
			return nil, fmt.Errorf("--workload %s needs philly.csv (give it with --trace): %w", o.workload, err)
		}
		var out *trace.Trace
		if o.workload == workload.FormatThemisW1 {
			out, err = workload.ThemisW1(tr, cfg)
		} else {
			out, err = workload.ThemisW2(tr, cfg)
		}
		if err != nil || !knobs.Has(knobArrivalScale) {
			return out, err
		}
		// workload.arrival_scale compresses (< 1) or stretches the apps'
		// arrival times, to vary the contention; every job keeps its app.
		x, err := arrivalScale(knobs.String(knobArrivalScale, ""))
		if err != nil {
			return nil, err
		}
		for i := range out.Jobs {
			out.Jobs[i].Submit *= x
		}
		out.Name += fmt.Sprintf("-arrivals%g", x)
		return out, nil
	case workload.FormatThemisFig18:
		jobs, dur := 1, 4*3600.0
		if knobs.Has("workload.fig18_jobs") {
			n, err := strconv.Atoi(knobs.String("workload.fig18_jobs", ""))
			if err != nil {
				return nil, fmt.Errorf("workload.fig18_jobs: %w", err)
			}
			jobs = n
		}
		if knobs.Has("workload.fig18_duration") {
			d, err := time.ParseDuration(knobs.String("workload.fig18_duration", ""))
			if err != nil {
				return nil, fmt.Errorf("workload.fig18_duration: %w", err)
			}
			dur = d.Seconds()
		}
		return workload.ThemisFig18(jobs, dur)
	case "fitgpp":
		cfg, err := workload.FitGppFromKnobs(func(key string) (string, bool) {
			if knobs.Has(key) {
				return knobs.String(key, ""), true
			}
			if key == workload.KnobSeed {
				return strconv.FormatInt(o.seed, 10), true
			}
			return "", false
		})
		if err != nil {
			return nil, err
		}
		return workload.FitGpp(cfg)
	}
	return nil, fmt.Errorf("--workload %q: unknown (known: fitgpp, themis-w1, themis-w2, themis-fig18)", o.workload)
}

// knobArrivalScale multiplies the Themis workloads' arrival times.
const knobArrivalScale = "workload.arrival_scale"

// arrivalScale reads workload.arrival_scale: a positive finite number.
func arrivalScale(v string) (float64, error) {
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(x > 0) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%s = %q: want a positive finite number", knobArrivalScale, v)
	}
	return x, nil
}

// defaultPhilly finds shared/traces/philly.csv beside the repository (or
// the working folder), for the Themis workloads.
func defaultPhilly() string {
	dir, _ := os.Getwd()
	for range 4 {
		p := filepath.Join(dir, "shared", "traces", "philly.csv")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		p = filepath.Join(dir, "..", "shared", "traces", "philly.csv")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		dir = filepath.Dir(dir)
	}
	return "philly.csv"
}
