package sim

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/sim/leased"
	"github.com/themis-nomad/themis/planner/stack"
)

// checkedAllocator is checked for a core.Allocator policy (themis): it
// forwards Allocate and checks every answer before the core does, since the
// core drops a bad grant with only a Wait, which a simulation would survive
// unnoticed:
//
//   - each preempted job is running;
//   - each granted job is queued, or running and preempted in the same
//     answer (a move), and granted at most once, exactly its gang;
//   - no GPU is granted twice, and every granted GPU is free or held by a
//     job the answer preempts.
type checkedAllocator struct {
	*checked
	alloc core.Allocator
}

// Capabilities implements core.Policy: checked's, allocating through c.
func (c *checkedAllocator) Capabilities() core.Capabilities {
	caps := c.checked.Capabilities()
	caps.Policy, caps.Allocator = c, c
	return caps
}

func (c *checkedAllocator) Allocate(now time.Time, jobs []*core.Job, free *core.FreeGPUs, held []core.Grant) ([]core.Grant, []core.JobKey) {
	grants, stop := c.alloc.Allocate(now, jobs, free, held)
	if c.err != nil {
		return grants, stop
	}
	fail := func(format string, args ...any) {
		c.err = fmt.Errorf("round %d at %v: %s", c.rounds, now.Sub(epoch).Seconds(), fmt.Sprintf(format, args...))
	}
	byKey := map[core.JobKey]*core.Job{}
	for _, j := range jobs {
		byKey[j.Key] = j
	}
	heldBy := map[string]core.JobKey{}
	for _, g := range held {
		for _, id := range g.GPUs {
			heldBy[id] = g.Job
		}
	}
	stopped := map[core.JobKey]bool{}
	for _, k := range stop {
		if j := byKey[k]; j == nil || j.Phase != core.Granted || stopped[k] {
			fail("preempts %s, which is not running (or twice)", k)
			return grants, stop
		}
		stopped[k] = true
	}
	granted := map[core.JobKey]bool{}
	used := map[string]bool{}
	for _, g := range grants {
		j := byKey[g.Job]
		switch {
		case j == nil:
			fail("grants GPUs to unknown job %s", g.Job)
		case j.Phase == core.Granted && !stopped[g.Job]:
			fail("grants GPUs to %s, which runs and is not preempted", g.Job)
		case granted[g.Job]:
			fail("grants GPUs to %s twice", g.Job)
		case len(g.GPUs) != j.GPUs:
			fail("grants %s %d GPUs for a gang of %d", g.Job, len(g.GPUs), j.GPUs)
		}
		granted[g.Job] = true
		for _, id := range g.GPUs {
			owner, isHeld := heldBy[id]
			switch {
			case used[id]:
				fail("grants GPU %s twice", id)
			case isHeld && !stopped[owner]:
				fail("grants GPU %s of running job %s to %s", id, owner, g.Job)
			case !isHeld:
				if _, ok := free.Locate(id); !ok {
					fail("grants unknown GPU %s to %s", id, g.Job)
				}
			}
			used[id] = true
		}
		if c.err != nil {
			break
		}
	}
	return grants, stop
}

func (c *checkedAllocator) Err() error {
	if e, ok := c.alloc.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}

// TestPropertyThemisRandomApps runs themis and the app-level baselines on
// random traces whose jobs are grouped into apps, some of them sweeps with
// phases, on random small clusters, and checks the results as
// TestPropertyRandomTraces does; themis's every allocation is also checked
// (checkedAllocator).
func TestPropertyThemisRandomApps(t *testing.T) {
	trials, jobs := 4, 200
	if testing.Short() {
		trials, jobs = 2, 100
	}
	if *propertyTrials > 0 {
		trials = *propertyTrials
	}
	for _, name := range []string{"themis", "app-las", "app-srtf", "app-srsf"} {
		t.Run(name, func(t *testing.T) {
			for trial := 0; trial < trials; trial++ {
				seed := int64(7000*trial + len(name))
				rng := rand.New(rand.NewSource(seed))
				tr := randomTrace(rng, jobs)
				// Apps: runs of consecutive jobs; a third of the runs of 3 or
				// more are sweeps whose later jobs are later phases.
				for i := 0; i < len(tr.Jobs); {
					k := 1 + rng.Intn(6)
					sweep := k >= 3 && rng.Intn(3) == 0
					app := fmt.Sprintf("a%d", i)
					for p := 0; p < k && i+p < len(tr.Jobs); p++ {
						j := &tr.Jobs[i+p]
						j.App = app
						if sweep {
							j.Submit = tr.Jobs[i].Submit
							j.Phase = 1 + p/2
						}
					}
					i += k
				}
				cl := randomCluster(t, rng)
				// Themis with and without the early lease end; the baselines
				// with instant reallocation and on leases.
				k, err := core.ParseKnobs([]string{"themis.lease=" + []string{"10m", "2m", "30s"}[trial%3],
					"themis.early_end=" + []string{"off", "on"}[trial%2], leased.Knob + "=" + []string{"instant", "instant", "2m", "2m"}[trial%4]})
				if err != nil {
					t.Fatal(err)
				}
				st, err := stack.Build(name, stack.Options{Knobs: k})
				if err != nil {
					t.Fatal(err)
				}
				p := st.Policy
				cost := float64(rng.Intn(2)) * 15
				cfg := Config{Trace: tr, Cluster: cl, Policy: p, Seed: seed, CheckpointCost: cost, RestoreCost: cost}
				r, _ := runChecked(t, cfg, 200000)
				what := fmt.Sprintf("%s seed %d on %s (%d GPUs)", name, seed, cl.Name, cl.TotalGPUs())
				checkResult(t, what, tr, r)
				// Phase gating: no job of phase p starts before every job of
				// phase p-1 of its app has ended.
				type ap struct {
					app   string
					phase int
				}
				lastEnd, firstStart := map[ap]float64{}, map[ap]float64{}
				for _, j := range r.Jobs {
					if j.Phase == 0 || !j.Started {
						continue
					}
					k := ap{j.App, j.Phase}
					lastEnd[k] = max(lastEnd[k], j.End)
					if s, ok := firstStart[k]; !ok || j.Start < s {
						firstStart[k] = j.Start
					}
				}
				for k, s := range firstStart {
					if e, ok := lastEnd[ap{k.app, k.phase - 1}]; k.phase > 1 && ok && s < e-1e-6 {
						t.Errorf("%s: app %s phase %d starts at %g, before phase %d ends at %g", what, k.app, k.phase, s, k.phase-1, e)
					}
				}
			}
		})
	}
}
