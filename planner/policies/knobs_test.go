package policies

import (
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

// FuzzNewPolicy: any value of any policy knob, for any policy, either
// fails with an error naming the knob, or gives a policy that decides a
// small scenario (running, queued and trial-and-error jobs on two nodes)
// without panicking and within the GPUs there are.
func FuzzNewPolicy(f *testing.F) {
	keys := []string{"tiresias.queues", "tiresias.promote_knob", "tiresias.promote_every", "tiresias.pack_limit",
		"tiresias.gittins_dist", "fitgpp.s", "fitgpp.max_preemptions"}
	names := testNames
	f.Add(uint8(6), uint8(0), "3200s,10h")
	f.Add(uint8(6), uint8(1), "inf")
	f.Add(uint8(8), uint8(5), "inf")
	f.Add(uint8(8), uint8(6), "-1")
	f.Add(uint8(7), uint8(2), "1m,2m")
	f.Add(uint8(0), uint8(3), "0")
	f.Fuzz(func(t *testing.T, ni, ki uint8, value string) {
		name, key := names[int(ni)%len(names)], keys[int(ki)%len(keys)]
		k, err := core.ParseKnobs([]string{key + "=" + value})
		if err != nil {
			return
		}
		p, err := newPolicy(name, k)
		if err != nil {
			if !strings.Contains(err.Error(), key) {
				t.Fatalf("%s with %s=%q: error names no knob: %v", name, key, value, err)
			}
			return
		}
		nodes := []core.Node{node8("n0"), node8("n1")}
		run := job("run", 4, 0, core.Granted)
		run.Attained, run.Executed = 4000, 1000
		te := job("te", 8, 5, core.Queued)
		te.Class = core.ClassTrialAndError
		jobs := []core.Job{run, te, job("be", 6, 10, core.Queued), job("small", 1, 20, core.Queued)}
		grants := []core.Grant{grant("run", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3")}
		d := core.Scheduler{Policy: p}.Decide(core.State{Nodes: nodes, Jobs: jobs, Grants: grants}, time.Unix(5000, 0))
		used := 0
		for _, a := range d.Actions {
			if g, ok := a.(core.GrantAction); ok {
				used += len(g.Grant.GPUs)
			}
		}
		if used > 16 {
			t.Fatalf("%s with %s=%q granted %d GPUs of 16", name, key, value, used)
		}
	})
}
