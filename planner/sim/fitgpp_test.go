package sim

import (
	"fmt"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/stack"
	"github.com/themis-nomad/themis/planner/workload"
)

// TestFitGppWorkload runs FitGpp and its baselines on a small generated
// workload: every job finishes, only BE jobs are preempted, never more than
// P times under fitgpp, and FitGpp's TE jobs wait far less than FIFO's.
func TestFitGppWorkload(t *testing.T) {
	cfg := workload.DefaultFitGppConfig()
	cfg.Jobs = 3000
	cfg.Cluster.Nodes = 12
	tr, err := workload.FitGpp(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Uniform("fitgpp12", 1, 12, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cl.Nodes {
		cl.Nodes[i].CPU, cl.Nodes[i].Memory = 32, 256
	}
	teWait := map[string]float64{}
	for _, tc := range []struct {
		name     string
		settings []string
		limit    int // the most preemptions of one job; 0: no limit
	}{
		{"fifo", nil, -1},
		{"fitgpp", nil, 1},
		{"fitgpp", []string{"fitgpp.max_preemptions=2"}, 2},
		{"lrtp", nil, 0},
		{"rand", nil, 0},
	} {
		k, err := core.ParseKnobs(tc.settings)
		if err != nil {
			t.Fatal(err)
		}
		pol, err := stack.NewPolicy(tc.name, k)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(Config{Trace: tr, Cluster: cl, Policy: pol, Seed: 1, RestoreCost: 20})
		if err != nil {
			t.Fatal(err)
		}
		label := fmt.Sprint(tc.name, tc.settings)
		total, n := 0.0, 0
		for _, j := range r.Jobs {
			if !j.Finished {
				t.Fatalf("%s: job %s did not finish", label, j.ID)
			}
			if j.Preemptions > 0 && j.Class != core.ClassBestEffort {
				t.Fatalf("%s: %s job %s preempted", label, j.Class, j.ID)
			}
			if tc.limit > 0 && j.Preemptions > tc.limit {
				t.Fatalf("%s: job %s preempted %d times, P = %d", label, j.ID, j.Preemptions, tc.limit)
			}
			if tc.limit < 0 && j.Preemptions > 0 {
				t.Fatalf("%s: job %s preempted", label, j.ID)
			}
			if j.Class == core.ClassTrialAndError {
				total += j.Queue
				n++
			}
		}
		if len(r.Restarts) != r.Preemptions {
			t.Errorf("%s: %d restarts recorded for %d preemptions", label, len(r.Restarts), r.Preemptions)
		}
		teWait[label] = total / float64(n)
	}
	if f, g := teWait["fifo[]"], teWait["fitgpp[]"]; !(g < f/5) {
		t.Errorf("average TE wait: fitgpp %.0f s, fifo %.0f s; want fitgpp's far lower", g, f)
	}
}
