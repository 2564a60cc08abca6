package workload

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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
)

// Knobs lists the knobs FitGppFromKnobs reads, in the order of its doc.
var Knobs = []string{KnobJobs, KnobSeed, KnobTEFraction, KnobLoad, KnobArrivals,
	KnobNodes, KnobNodeCPUs, KnobNodeMemoryGB, KnobNodeGPUs}

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
