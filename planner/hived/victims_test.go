package hived

import (
	"slices"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
)

// TestVictimCost checks which jobs a guaranteed job preempts without a
// victim cost (HiveD's order) and with one (least lost work first): the
// opportunistic jobs its cell's binding evicts, and its VC's
// lower-priority jobs of one priority.
func TestVictimCost(t *testing.T) {
	type alloc struct {
		job        string
		vc         string
		gpus, prio int
	}
	opp := []alloc{{"o1", "", 8, Opportunistic}, {"o2", "", 4, Opportunistic}, {"o3", "", 4, Opportunistic}}
	sameVC := []alloc{{"j1", "a", 2, 0}, {"j2", "a", 2, 0}, {"j3", "a", 2, 0}, {"j4", "a", 2, 0}}
	cases := []struct {
		name   string
		before []alloc
		job    alloc
		cost   map[string]float64 // nil: no victim cost
		// want is the preempted jobs, one of them when several are listed
		// in oneOf.
		want  []string
		oneOf bool
	}{
		// o1 fills n0, o2 and o3 fill n1: both nodes have 8
		// opportunistic GPUs, and a's node binds the first.
		{name: "opportunistic, no cost: fewest GPUs, then order", before: opp, job: alloc{"j", "a", 2, 0}, want: []string{"o1"}},
		{name: "opportunistic: the node whose jobs lose the least", before: opp, job: alloc{"j", "a", 2, 0},
			cost: map[string]float64{"o1": 1000, "o2": 10, "o3": 10}, want: []string{"o2", "o3"}, oneOf: true},
		{name: "opportunistic: the cost counts every job of the cell", before: opp, job: alloc{"j", "a", 2, 0},
			cost: map[string]float64{"o1": 15, "o2": 10, "o3": 10}, want: []string{"o1"}},
		{name: "opportunistic: costs of 0 tie", before: opp, job: alloc{"j", "a", 2, 0},
			cost: map[string]float64{}, want: []string{"o1"}},
		// The VC's node is full of priority-0 pairs; a priority-1 pair
		// preempts the newest by default, the cheapest with costs.
		{name: "lower priority, no cost: the newest", before: sameVC, job: alloc{"j5", "a", 2, 1}, want: []string{"j4"}},
		{name: "lower priority: the cheapest of the priority", before: sameVC, job: alloc{"j5", "a", 2, 1},
			cost: map[string]float64{"j1": 50, "j2": 1, "j3": 50, "j4": 50}, want: []string{"j2"}},
	}
	cl, err := cluster.FromPresetOrFile("n2g8")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig("v.hcl", []byte(twoNodes8))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(cl.Nodes, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.before {
				if _, err := c.Allocate(Request{Job: key(a.job), VC: a.vc, GPUs: a.gpus, Priority: a.prio}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.cost != nil {
				c.SetVictimCost(func(k core.JobKey) float64 { return tc.cost[k.ID] })
			}
			a, err := c.Allocate(Request{Job: key(tc.job.job), VC: tc.job.vc, GPUs: tc.job.gpus, Priority: tc.job.prio})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range a.Preempt {
				got = append(got, k.ID)
			}
			switch {
			case tc.oneOf && (len(got) != 1 || !slices.Contains(tc.want, got[0])):
				t.Errorf("preempted %v, want one of %v", got, tc.want)
			case !tc.oneOf && !slices.Equal(got, tc.want):
				t.Errorf("preempted %v, want %v", got, tc.want)
			}
			if err := check(c); err != nil {
				t.Fatal(err)
			}
		})
	}
}
