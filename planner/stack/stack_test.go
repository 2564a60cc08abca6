package stack

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/quota"
)

// TestPlacementsBuildOneWay: every virtual-cluster placement builds its
// placer through NewPlacer, only hived-overflow overflows, and the live
// planner refuses all but hived.
func TestPlacementsBuildOneWay(t *testing.T) {
	cl, err := cluster.Uniform("two", 1, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	vcs := &hived.Config{VCs: []hived.VCConfig{
		{Name: "a", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
		{Name: "b", Cells: []hived.CellCount{{Type: "node8", Count: 1}}},
	}}
	for _, p := range Placements() {
		s, err := Build("fifo", Options{VCs: vcs, Placement: p})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		pl, err := s.NewPlacer(cl.Nodes)
		if err != nil {
			t.Fatalf("%s: NewPlacer: %v", p, err)
		}
		switch pl.(type) {
		case *hived.Placer:
			if p != PlaceHived && p != PlaceHivedOverflow {
				t.Errorf("%s: placer %T", p, pl)
			}
		case *quota.Placer:
			if p != PlaceQuota && p != PlaceQuotaYARN && p != PlaceQuotaGandiva {
				t.Errorf("%s: placer %T", p, pl)
			}
		default:
			t.Errorf("%s: placer %T", p, pl)
		}
		if got := s.Scheduler().Overflow; got != (p == PlaceHivedOverflow) {
			t.Errorf("%s: Planner().Overflow = %v", p, got)
		}
		if live := s.Live(); (live == nil) != (p == PlaceHived) {
			t.Errorf("%s: Live() = %v", p, live)
		}
	}
	if _, err := Build("fifo", Options{VCs: vcs, Placement: "quota-tiresias"}); err == nil || !strings.Contains(err.Error(), "quota-yarn") {
		t.Errorf("unknown placement: %v, want an error that lists the known ones", err)
	}
}

// vcConfig parses a VC config for the tests, with positions in "vcs.hcl".
func vcConfig(t *testing.T, src string) *hived.Config {
	t.Helper()
	cfg, err := hived.ParseConfig("vcs.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestVCPolicyErrors: a VC's policy and knobs are built through the
// registry, like the top-level policy; what cannot work is refused at
// build time (or by Live, for the live planner), naming the VC config's
// file:line and field.
func TestVCPolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, policy, vc, want string
		live                   bool // refused by Live, not Build
	}{
		{"unknown policy", "fifo", `policy = "lottery"`, `vcs.hcl:2,12: vc "a": policy "lottery": unknown (known: fifo, `, false},
		{"allocates", "fifo", `policy = "themis"`, `vcs.hcl:2,12: vc "a": policy "themis" allocates GPUs itself, which a virtual cluster cannot carry out`, false},
		{"misspelt knob", "fifo", "policy = \"tiresias-las\"\n  knobs = { \"tiresias.qeueus\" = \"1h\" }",
			`vcs.hcl:3,11: vc "a": policy "tiresias-las": unknown setting(s) tiresias.qeueus (did you mean tiresias.queues?)`, false},
		{"another policy's knob", "fifo", "policy = \"tiresias-las\"\n  knobs = { \"fitgpp.s\" = 2 }",
			`vcs.hcl:3,11: vc "a": knobs: unknown setting(s) fitgpp.s (policy "tiresias-las" reads no such knob)`, false},
		{"bad knob value", "fifo", "policy = \"tiresias-las\"\n  knobs = { \"tiresias.queues\" = \"soon\" }",
			`vcs.hcl:3,11: vc "a": tiresias.queues = "soon"`, false},
		{"knobs of the top-level policy", "fitgpp", `knobs = { "fitgpp.s" = "x" }`, `vcs.hcl:2,11: vc "a": fitgpp.s = "x": not a number`, false},
		{"needs remaining times, live", "fifo", `policy = "srtf"`, `vcs.hcl:2,12: vc "a": policy "srtf" ranks by remaining time`, true},
		{"top-level allocates", "themis", ``, `policy "themis" allocates GPUs itself, which virtual clusters (placement hived) cannot carry out`, false},
		{"makes room with overflow", "fifo", `policy = "fitgpp"`, `vcs.hcl:2,12: vc "a": policy "fitgpp" preempts to make room inside its virtual clusters, which placement hived-overflow does not carry out yet`, false},
		{"preempts with overflow", "tiresias-las", ``, `policy "tiresias-las" preempts running jobs inside its virtual clusters, which placement hived-overflow`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := vcConfig(t, "vc \"a\" {\n  "+tc.vc+"\n  cells {\n    type  = \"node8\"\n    count = 1\n  }\n}\n")
			place := PlaceHived
			if strings.Contains(tc.name, "overflow") {
				place = PlaceHivedOverflow
			}
			s, err := Build(tc.policy, Options{VCs: cfg, Placement: place})
			if tc.live {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				err = s.Live()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestVCPolicyKnobs: a VC's knobs override the stack's for its policy
// only; a VC with knobs and no policy runs its own instance of the
// top-level policy; the top-level knobs a VC's policy reads count as used.
func TestVCPolicyKnobs(t *testing.T) {
	cfg := vcConfig(t, `
vc "a" {
  knobs = { "tiresias.queues" = "1h" }
}
vc "b" {}
vc "c" {
  policy = "tiresias-gittins"
}
`)
	k, err := core.ParseKnobs([]string{"tiresias.queues=100"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build("tiresias-las", Options{Knobs: k, VCs: cfg})
	if err != nil {
		t.Fatal(err)
	}
	pv, ok := s.Policy.(*core.PerVC)
	if !ok {
		t.Fatalf("policy %T, want *core.PerVC", s.Policy)
	}
	thresholds := func(vc string) []float64 { return pv.Of(vc).(*policies.Tiresias).Thresholds }
	if got := thresholds("a"); !slices.Equal(got, []float64{3600}) {
		t.Errorf("vc a: thresholds %v, want its own 1h", got)
	}
	if got := thresholds("b"); !slices.Equal(got, []float64{100}) {
		t.Errorf("vc b: thresholds %v, want the stack's", got)
	}
	if got := thresholds("c"); !slices.Equal(got, []float64{100}) {
		t.Errorf("vc c: thresholds %v, want the stack's", got)
	}
	if pv.Of("a") == pv.Of("b") || pv.Of("b") != pv.Default {
		t.Error("vc a does not run its own instance, or vc b not the stack's")
	}
	if err := k.Unused(); err != nil {
		t.Errorf("top-level knobs: %v", err)
	}
	if s.VCPolicies["c"].Name != "tiresias-gittins" || s.VCPolicies["c"].At != "vcs.hcl:7,12: " {
		t.Errorf("vc c: %+v", s.VCPolicies["c"])
	}
}

// TestVCPoliciesDecide: three VCs of the dev cluster (3 nodes x 8 GPUs),
// one node each, with HiveD's cells: fitgpp in "trial", tiresias-las in
// "research", the stack's fifo in "spare". In one Decide the trial VC's
// trial-and-error job preempts one best-effort job as FitGpp says, the
// research VC's new job preempts the job that used up its first queue as
// Tiresias says, and the spare VC's guaranteed job evicts the opportunistic
// job on its cells, whatever VC that job came from.
func TestVCPoliciesDecide(t *testing.T) {
	cl, err := cluster.Uniform("dev", 1, 3, 8)
	if err != nil {
		t.Fatal(err)
	}
	cfg := vcConfig(t, `
vc "trial" {
  policy = "fitgpp"
  cells {
    type  = "node8"
    count = 1
  }
}
vc "research" {
  policy = "tiresias-las"
  knobs  = { "tiresias.queues" = "1h" }
  cells {
    type  = "node8"
    count = 1
  }
}
vc "spare" {
  cells {
    type  = "node8"
    count = 1
  }
}
`)
	for _, tc := range []struct {
		name               string
		policy             string
		vcs                *hived.Config
		preempted, granted []string
	}{
		{"per-VC policies", "fifo", cfg, []string{"be1", "old", "opp"}, []string{"new", "sp1", "te1"}},
		{"fifo everywhere", "fifo", stripPolicies(cfg), []string{"opp"}, []string{"sp1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Build(tc.policy, Options{VCs: tc.vcs})
			if err != nil {
				t.Fatal(err)
			}
			pl, err := s.NewPlacer(cl.Nodes)
			if err != nil {
				t.Fatal(err)
			}
			h := pl.(*hived.Placer)
			mk := func(id, vc string, gpus, submitted, prio int, class string, phase core.Phase) core.Job {
				return core.Job{Key: core.JobKey{Namespace: "default", ID: id}, VC: vc, GPUs: gpus, Priority: prio, Class: class,
					Submitted: time.Unix(int64(submitted), 0), Phase: phase}
			}
			running := []core.Job{
				mk("be1", "trial", 4, 1, 0, core.ClassBestEffort, core.Granted),
				mk("be2", "trial", 4, 2, 0, core.ClassBestEffort, core.Granted),
				mk("old", "research", 8, 3, 0, "", core.Granted),
				mk("opp", "research", 8, 4, -1, "", core.Granted),
			}
			running[2].Attained, running[2].Executed = 8*7200, 7200
			var grants []core.Grant
			for _, j := range running {
				a, err := h.Cluster().Allocate(hived.Request{Job: j.Key, VC: j.VC, GPUs: j.GPUs, Priority: j.Priority})
				if err != nil {
					t.Fatal(err)
				}
				grants = append(grants, a.Grant())
			}
			jobs := append(running,
				mk("te1", "trial", 4, 5, 0, core.ClassTrialAndError, core.Queued),
				mk("new", "research", 8, 6, 0, "", core.Queued),
				mk("sp1", "spare", 8, 7, 0, "", core.Queued),
			)
			cp := s.Scheduler()
			cp.Placer = pl
			d := cp.Decide(core.State{Nodes: cl.Nodes, Jobs: jobs, Grants: grants}, time.Unix(10000, 0))
			var preempted, granted []string
			for _, a := range d.Actions {
				switch a := a.(type) {
				case core.PreemptAction:
					preempted = append(preempted, a.Grant.Job.ID)
				case core.GrantAction:
					granted = append(granted, a.Grant.Job.ID)
				}
			}
			slices.Sort(preempted)
			slices.Sort(granted)
			if !slices.Equal(preempted, tc.preempted) || !slices.Equal(granted, tc.granted) {
				t.Errorf("preempted %v granted %v, want %v and %v (%v)", preempted, granted, tc.preempted, tc.granted, d.Actions)
			}
		})
	}
}

// stripPolicies is cfg without the VCs' policies and knobs.
func stripPolicies(cfg *hived.Config) *hived.Config {
	out := &hived.Config{GPUType: cfg.GPUType}
	for _, v := range cfg.VCs {
		v.Policy, v.Knobs = "", nil
		out.VCs = append(out.VCs, v)
	}
	return out
}

// TestVCPoliciesKeepToTheirVC: on random states of three VCs with random
// policies (fifo, fitgpp, las, tiresias-las), one Decide never preempts a
// guaranteed job of a VC whose policy neither preempts nor makes room (only
// opportunistic jobs and a VC's own jobs, by its own policy, are victims),
// never leaves a GPU held twice, and never gives a VC's guaranteed jobs
// more GPUs than its cells.
func TestVCPoliciesKeepToTheirVC(t *testing.T) {
	cl, err := cluster.Uniform("dev", 1, 3, 8)
	if err != nil {
		t.Fatal(err)
	}
	policies := []string{"fifo", "fitgpp", "las", "tiresias-las"}
	names := []string{"a", "b", "c"}
	trials := 2000
	if testing.Short() {
		trials = 200
	}
	preempted := map[string]int{} // guaranteed victims by their VC's policy
	for seed := range trials {
		rng := rand.New(rand.NewSource(int64(seed)))
		cfg := &hived.Config{}
		pol := map[string]string{}
		for _, n := range names {
			pol[n] = policies[rng.Intn(len(policies))]
			cfg.VCs = append(cfg.VCs, hived.VCConfig{Name: n, Policy: pol[n], Cells: []hived.CellCount{{Type: "node8", Count: 1}}})
		}
		s, err := Build("fifo", Options{VCs: cfg})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := s.NewPlacer(cl.Nodes)
		if err != nil {
			t.Fatal(err)
		}
		h := pl.(*hived.Placer)
		var jobs []core.Job
		var grants []core.Grant
		for i := range 6 + rng.Intn(10) {
			j := core.Job{Key: core.JobKey{Namespace: "default", ID: fmt.Sprintf("j%02d", i)}, VC: names[rng.Intn(3)],
				GPUs: []int{1, 2, 4, 8}[rng.Intn(4)], Priority: []int{0, 0, -1}[rng.Intn(3)],
				Class:     []string{core.ClassBestEffort, core.ClassTrialAndError}[rng.Intn(2)],
				Submitted: time.Unix(int64(i), 0), Phase: core.Queued, Preemptions: rng.Intn(2)}
			if rng.Intn(2) == 0 {
				a, err := h.Cluster().Allocate(hived.Request{Job: j.Key, VC: j.VC, GPUs: j.GPUs, Priority: j.Priority})
				if err == nil && len(a.Preempt) == 0 {
					j.Phase = core.Granted
					j.Executed = float64(rng.Intn(4000))
					j.Attained = j.Executed * float64(j.GPUs)
					grants = append(grants, a.Grant())
				} else if err == nil {
					h.Release(j.Key)
				}
			}
			jobs = append(jobs, j)
		}
		byKey := map[core.JobKey]core.Job{}
		for _, j := range jobs {
			byKey[j.Key] = j
		}
		cp := s.Scheduler()
		cp.Placer = pl
		d := cp.Decide(core.State{Nodes: cl.Nodes, Jobs: jobs, Grants: grants}, time.Unix(5000, 0))
		holder := map[string]core.JobKey{}
		for _, g := range grants {
			for _, id := range g.GPUs {
				holder[id] = g.Job
			}
		}
		used := map[string]int{}
		for _, g := range grants {
			if j := byKey[g.Job]; j.Priority >= 0 {
				used[j.VC] += j.GPUs
			}
		}
		for _, a := range d.Actions {
			switch a := a.(type) {
			case core.PreemptAction:
				v := byKey[a.Grant.Job]
				if v.Priority >= 0 && pol[v.VC] == "fifo" {
					t.Fatalf("seed %d: guaranteed job %s of fifo VC %s preempted (policies %v): %v", seed, v.Key, v.VC, pol, d.Actions)
				}
				for _, id := range a.Grant.GPUs {
					delete(holder, id)
				}
				if v.Priority >= 0 {
					used[v.VC] -= v.GPUs
					preempted[pol[v.VC]]++
				}
			case core.GrantAction:
				for _, id := range a.Grant.GPUs {
					if k, held := holder[id]; held {
						t.Fatalf("seed %d: GPU %s granted to %s while %s holds it: %v", seed, id, a.Grant.Job, k, d.Actions)
					}
					holder[id] = a.Grant.Job
				}
				if j := byKey[a.Grant.Job]; j.Priority >= 0 {
					used[j.VC] += j.GPUs
				}
			}
		}
		for vc, n := range used {
			if n > 8 {
				t.Fatalf("seed %d: VC %s's guaranteed jobs hold %d GPUs, its cells 8: %v", seed, vc, n, d.Actions)
			}
		}
	}
	// The policies that preempt did, somewhere.
	for _, p := range []string{"fitgpp", "las", "tiresias-las"} {
		if preempted[p] == 0 {
			t.Errorf("no %s VC preempted a guaranteed job in %d trials", p, trials)
		}
	}
	t.Logf("guaranteed victims by their VC's policy: %v", preempted)
}

// TestVCPoliciesLiveRealloc: sim.realloc (a simulator baseline) is refused
// live for the stack's policy and for a VC's own alike.
func TestVCPoliciesLiveRealloc(t *testing.T) {
	for _, tc := range []struct{ top, vc, want string }{
		{"las", "fitgpp", `policy "las" with sim.realloc`},
		{"fifo", "las", `vcs.hcl:6,12: vc "a": policy "las" with sim.realloc`},
	} {
		cfg := vcConfig(t, "vc \"a\" {\n  cells {\n    type  = \"node8\"\n    count = 1\n  }\n  policy = \""+tc.vc+"\"\n}\nvc \"b\" {}\n")
		k, err := core.ParseKnobs([]string{"sim.realloc=10m"})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Build(tc.top, Options{Knobs: k, VCs: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Live(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with vc policy %s: Live() = %v, want %q", tc.top, tc.vc, err, tc.want)
		}
	}
}
