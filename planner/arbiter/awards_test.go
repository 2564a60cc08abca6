package arbiter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

// stay keeps an expired job on its own GPUs when the round left them idle
// or gave them to a gang of the same class it can trade with, and gave it
// a gang placed no better elsewhere; it does not when the move improves
// placement or its GPUs are not free to keep.
func TestStayKeepsOwnGPUs(t *testing.T) {
	nodes := []core.Node{node("n0", "r0", 4), node("n1", "r0", 4), node("n2", "r0", 2), node("n3", "r0", 2)}
	key := func(id string) core.JobKey { return core.JobKey{Namespace: "sim", ID: id} }
	gpus := func(s string) []string { return strings.Split(s, "+") }
	held := []core.Grant{
		{Job: key("a"), Node: "n1", GPUs: gpus("n1-0+n1-1+n1-2+n1-3")}, // one machine
		{Job: key("s"), GPUs: gpus("n2-0+n2-1+n3-0+n3-1")},             // spread
	}
	free := core.NewFreeGPUs(nodes, nil)
	grantOf := map[core.JobKey]core.Grant{}
	for _, g := range held {
		grantOf[g.Job] = g
	}
	isExpired := map[core.JobKey]bool{key("a"): true, key("s"): true}
	for _, tc := range []struct {
		name     string
		out      []core.Grant
		idle     []string
		wantKept []string
		wantIdle int
		wantZ    string // z's GPUs after a swap
	}{
		{
			name:     "a's machine left idle: a stays, n0 goes back",
			out:      []core.Grant{{Job: key("a"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}},
			idle:     gpus("n1-0+n1-1+n1-2+n1-3"),
			wantKept: []string{"a"},
			wantIdle: 4,
		},
		{
			name: "a's machine partly taken: a moves",
			out:  []core.Grant{{Job: key("a"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}},
			idle: gpus("n1-0+n1-1+n1-2"),
		},
		{
			name: "s's spread GPUs idle but the new gang is on one machine: s moves",
			out:  []core.Grant{{Job: key("s"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}},
			idle: gpus("n2-0+n2-1+n3-0+n3-1"),
		},
		{
			name:     "a's machine went to z: they swap, a stays",
			out:      []core.Grant{{Job: key("a"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}, {Job: key("z"), Node: "n1", GPUs: gpus("n1-0+n1-1+n1-2+n1-3")}},
			wantKept: []string{"a"},
			wantZ:    "n0-0+n0-1+n0-2+n0-3",
		},
		{
			name: "s's spread GPUs went to z, s got a machine: no swap",
			out:  []core.Grant{{Job: key("s"), Node: "n0", GPUs: gpus("n0-0+n0-1+n0-2+n0-3")}, {Job: key("z"), GPUs: gpus("n2-0+n2-1+n3-0+n3-1")}},
		},
	} {
		kept := map[core.JobKey]bool{}
		out, idle := stay(append([]core.Grant(nil), tc.out...), tc.idle, isExpired, kept, grantOf, free)
		var got []string
		for k := range kept {
			got = append(got, k.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.wantKept) {
			t.Errorf("%s: kept %v, want %v", tc.name, got, tc.wantKept)
		}
		if tc.wantZ != "" {
			if len(out) != 1 || out[0].Job != key("z") || strings.Join(out[0].GPUs, "+") != tc.wantZ || out[0].Node != "n0" {
				t.Errorf("%s: grants %v, want z alone on %s", tc.name, out, tc.wantZ)
			}
		} else if len(tc.wantKept) > 0 {
			if len(out) != 0 || len(idle) != tc.wantIdle || idle[0] != "n0-0" {
				t.Errorf("%s: grants %v, idle %v; want none and n0's GPUs idle", tc.name, out, idle)
			}
		} else if len(out) != len(tc.out) || len(idle) != len(tc.idle) {
			t.Errorf("%s: grants %v, idle %v; want both unchanged", tc.name, out, idle)
		}
	}
}
