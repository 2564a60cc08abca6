package workload

import (
	"reflect"
	"strings"
	"testing"
)

func knobs(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFitGppFromKnobs(t *testing.T) {
	def := DefaultFitGppConfig()
	cases := []struct {
		name string
		kv   []string
		want func(*FitGppConfig)
	}{
		{"defaults", nil, func(*FitGppConfig) {}},
		{"jobs", []string{KnobJobs, "65536"}, func(c *FitGppConfig) { c.Jobs = 65536 }},
		{"jobs as a power of two", []string{KnobJobs, " 2^16 "}, func(c *FitGppConfig) { c.Jobs = 65536 }},
		{"seed", []string{KnobSeed, "18446744073709551615"}, func(c *FitGppConfig) { c.Seed = 1<<64 - 1 }},
		{"te fraction", []string{KnobTEFraction, "0.5"}, func(c *FitGppConfig) { c.TEFraction = 0.5 }},
		{"no TE", []string{KnobTEFraction, "0"}, func(c *FitGppConfig) { c.TEFraction = 0 }},
		{"load", []string{KnobLoad, "1.5"}, func(c *FitGppConfig) { c.Load = 1.5 }},
		{"arrivals", []string{KnobArrivals, "Poisson"}, func(c *FitGppConfig) { c.Arrivals = ArrivalsPoisson }},
		{"TE GPUs", []string{KnobTEGPUs, "3"}, func(c *FitGppConfig) { c.TE.GPUs.Mean, c.TE.GPUs.SD = 3, 3 }},
		{"virtual clusters", []string{KnobVCs, "trial, research"}, func(c *FitGppConfig) { c.VCs = []string{"trial", "research"} }},
		{"node shape", []string{KnobNodes, "10", KnobNodeCPUs, "16", KnobNodeMemoryGB, "128.5", KnobNodeGPUs, "4"}, func(c *FitGppConfig) {
			c.Cluster = Cluster{Nodes: 10, Node: Node{CPUs: 16, MemoryGB: 128.5, GPUs: 4}}
			for _, p := range []*ClassParams{&c.TE, &c.BE} {
				p.CPUs.Hi, p.MemoryGB.Hi, p.GPUs.Hi = 16, 128, 4
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FitGppFromKnobs(knobs(c.kv...))
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
}

func TestFitGppFromKnobsInvalid(t *testing.T) {
	cases := []struct {
		key, val, want string
	}{
		{KnobJobs, "1.5", `workload.jobs = "1.5": want a whole number from 1 to`},
		{KnobJobs, "abc", `workload.jobs = "abc"`},
		{KnobJobs, "0", `workload.jobs = "0"`},
		{KnobJobs, "-3", `workload.jobs = "-3"`},
		{KnobJobs, "2^25", `workload.jobs = "2^25"`},
		{KnobJobs, "3^4", `workload.jobs = "3^4"`},
		{KnobJobs, "", `workload.jobs = ""`},
		{KnobSeed, "-1", `workload.seed = "-1": want a whole number`},
		{KnobSeed, "1e3", `workload.seed = "1e3"`},
		{KnobTEFraction, "1.5", `workload.te_fraction = "1.5": want a number from 0 to 1`},
		{KnobTEFraction, "-0.1", `workload.te_fraction = "-0.1"`},
		{KnobTEFraction, "NaN", `workload.te_fraction = "NaN"`},
		{KnobLoad, "-1", `workload.load = "-1": want a positive number`},
		{KnobLoad, "0", `workload.load = "0"`},
		{KnobLoad, "inf", `workload.load = "inf"`},
		{KnobLoad, "two", `workload.load = "two"`},
		{KnobArrivals, "uniform", `workload.arrivals = "uniform": want "fifo" or "poisson"`},
		{KnobNodes, "0", `workload.nodes = "0": want a whole number`},
		{KnobNodes, "8.5", `workload.nodes = "8.5"`},
		{KnobNodeGPUs, "2.5", `workload.node_gpus = "2.5"`},
		{KnobNodeCPUs, "-4", `workload.node_cpus = "-4": want a positive number`},
		{KnobNodeMemoryGB, "0.5", `node holds only 0.5`},
		{KnobVCs, "a,,b", `workload.vcs = "a,,b": want virtual cluster names, comma-separated`},
	}
	for _, c := range cases {
		_, err := FitGppFromKnobs(knobs(c.key, c.val))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%q: error %v, want one containing %q", c.key, c.val, err, c.want)
		}
	}
}

// The knobs' config generates.
func TestFitGppFromKnobsGenerates(t *testing.T) {
	cfg, err := FitGppFromKnobs(knobs(KnobJobs, "1000", KnobNodeGPUs, "2", KnobNodeCPUs, "6"))
	if err != nil {
		t.Fatal(err)
	}
	tr := mustFitGpp(t, cfg)
	checkJobs(t, cfg, tr)
}

// FuzzFitGppFromKnobs: any knob values either fail with an error naming
// the knob, or give a config that generates a workload (50 jobs of it).
func FuzzFitGppFromKnobs(f *testing.F) {
	f.Add("2^19", "0.5", "0.9", "poisson", "84", "20", "64", "4", "1")
	f.Add("10", "nan", "-1", "fifo", "0", "inf", "1e400", "2^41", "0")
	f.Fuzz(func(t *testing.T, jobs, te, load, arrivals, nodes, cpus, mem, gpus, teGPUs string) {
		get := knobs(KnobJobs, jobs, KnobTEFraction, te, KnobLoad, load, KnobArrivals, arrivals,
			KnobNodes, nodes, KnobNodeCPUs, cpus, KnobNodeMemoryGB, mem, KnobNodeGPUs, gpus, KnobTEGPUs, teGPUs)
		cfg, err := FitGppFromKnobs(get)
		if err != nil {
			if !strings.Contains(err.Error(), "workload") {
				t.Fatalf("error names no knob: %v", err)
			}
			return
		}
		cfg.Jobs = min(cfg.Jobs, 50)
		cfg.Cluster.Nodes = min(cfg.Cluster.Nodes, 64)
		if _, err := FitGpp(cfg); err != nil {
			t.Fatalf("accepted knobs do not generate: %v (%+v)", err, cfg)
		}
	})
}

// FuzzThemisFromKnobs: any knob values either fail with an error naming
// the knob, or give a config that Validate accepts.
func FuzzThemisFromKnobs(f *testing.F) {
	f.Add("1", "0", "0", "14d", "busiest", "2", "60", "10", "100", "0.1", "0.1,0.6,0.3", "64", "1000")
	f.Add("x", "-1", "2^41", "nan", "1e400d", "0", "-60", "0", "1", "1", "1,0", "3", "0")
	f.Fuzz(func(t *testing.T, seed, apps, maxJobs, window, start, maxGPUs, gap, minSweep, maxApp, single, mix, maxSweep, iters string) {
		get := knobs(KnobSeed, seed, KnobApps, apps, KnobMaxJobs, maxJobs, KnobWindow, window, KnobWindowStart, start,
			KnobMaxJobGPUs, maxGPUs, KnobAppGap, gap, KnobMinSweepJobs, minSweep, KnobMaxAppJobs, maxApp,
			KnobSingleFraction, single, KnobModelMix, mix, KnobMaxSweep, maxSweep, KnobPhaseIterations, iters)
		cfg, err := ThemisFromKnobs(get)
		if err != nil {
			if !strings.Contains(err.Error(), "workload") {
				t.Fatalf("error names no knob: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted knobs give an invalid config: %v", err)
		}
	})
}
