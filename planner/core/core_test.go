package core

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// node8 is a DGX-like node: 2 sockets x 2 PCIe switches x 1 NVLink pair of 2.
func node8(name string) Node {
	n := Node{ID: "id-" + name, Name: name, Schedulable: true}
	for i := 0; i < 8; i++ {
		n.GPUs = append(n.GPUs, GPU{
			ID:      fmt.Sprintf("%s-%d", name, i),
			Index:   i,
			Path:    []string{fmt.Sprintf("socket%d", i/4), fmt.Sprintf("switch%d", i/2), fmt.Sprintf("pair%d", i/2)},
			Healthy: true,
		})
	}
	return n
}

func job(id string, gpus int, submitted int, phase Phase) Job {
	return Job{Key: JobKey{"default", id}, GPUs: gpus, Submitted: time.Unix(int64(submitted), 0), Phase: phase}
}

func grant(id, node string, gpus ...string) Grant {
	return Grant{Job: JobKey{"default", id}, Node: node, GPUs: gpus}
}

func TestPlaceConsolidates(t *testing.T) {
	cases := []struct {
		name   string
		grants []Grant
		k      int
		want   []string
	}{
		{"one GPU takes lowest index", nil, 1, []string{"n0-0"}},
		{"pair stays in an NVLink pair", nil, 2, []string{"n0-0", "n0-1"}},
		{"four stay in a socket", nil, 4, []string{"n0-0", "n0-1", "n0-2", "n0-3"}},
		{"whole node", nil, 8, []string{"n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7"}},
		{"single GPU fills a broken pair (best fit)", []Grant{grant("a", "id-n0", "n0-0")}, 1, []string{"n0-1"}},
		{"pair skips the broken pair", []Grant{grant("a", "id-n0", "n0-0")}, 2, []string{"n0-2", "n0-3"}},
		{"four skip the broken socket", []Grant{grant("a", "id-n0", "n0-0")}, 4, []string{"n0-4", "n0-5", "n0-6", "n0-7"}},
		{"three in the broken socket", []Grant{grant("a", "id-n0", "n0-0")}, 3, []string{"n0-1", "n0-2", "n0-3"}},
		{"five span sockets, whole pairs first", []Grant{grant("a", "id-n0", "n0-0", "n0-1", "n0-2")}, 5,
			[]string{"n0-3", "n0-4", "n0-5", "n0-6", "n0-7"}},
		{"six take the whole pairs, not the broken one", []Grant{grant("a", "id-n0", "n0-0")}, 6,
			[]string{"n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFreeGPUs([]Node{node8("n0")}, tc.grants)
			g, ok := f.Place(JobKey{"default", "j"}, tc.k, true)
			if !ok {
				t.Fatalf("no placement for %d GPUs", tc.k)
			}
			if !reflect.DeepEqual(g.GPUs, tc.want) {
				t.Fatalf("got %v, want %v", g.GPUs, tc.want)
			}
		})
	}
}

// A consolidated gang that one rack can hold only on more nodes than the
// empty cluster needs takes the fewest nodes across racks: 12 GPUs go to
// two 8-GPU nodes of two racks, not three 4-GPU nodes of one, and not
// nowhere (it used to wait for a rack that could never hold it so).
func TestPlaceConsolidatesAcrossRacks(t *testing.T) {
	var nodes []Node
	for i, r := range []string{"r0", "r0", "r0"} {
		n := Node{ID: fmt.Sprintf("small%d", i), Rack: r, Schedulable: true}
		for g := range 4 {
			n.GPUs = append(n.GPUs, GPU{ID: fmt.Sprintf("small%d-%d", i, g), Index: g, Healthy: true})
		}
		nodes = append(nodes, n)
	}
	for _, r := range []string{"r1", "r2"} {
		n := node8("big-" + r)
		n.Rack = r
		nodes = append(nodes, n)
	}
	f := NewFreeGPUs(nodes, nil)
	g, ok := f.Place(JobKey{"default", "j"}, 12, true)
	if !ok {
		t.Fatal("12 GPUs consolidated: no placement on an empty cluster of 3x4 (one rack) and 2x8 (two racks)")
	}
	perNode := map[string]int{}
	for _, id := range g.GPUs {
		n, _ := f.Locate(id)
		perNode[n.ID]++
	}
	if len(perNode) != 2 || perNode["id-big-r1"] == 0 || perNode["id-big-r2"] == 0 {
		t.Errorf("12 GPUs on %v, want the two 8-GPU nodes", perNode)
	}
	// Spread placement (no consolidation) still prefers one rack.
	f = NewFreeGPUs(nodes, nil)
	g, _ = f.Place(JobKey{"default", "k"}, 12, false)
	for _, id := range g.GPUs {
		if n, _ := f.Locate(id); n.Rack != "r0" {
			t.Fatalf("12 GPUs spread: %v, want rack r0's three nodes", g.GPUs)
		}
	}
}

func TestPlacePrefersBestFitNode(t *testing.T) {
	// n0 has a free pair only; n1 is empty. A 2-GPU job takes n0's pair and
	// keeps n1 whole for an 8-GPU job.
	nodes := []Node{node8("n0"), node8("n1")}
	grants := []Grant{grant("a", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5")}
	f := NewFreeGPUs(nodes, grants)
	g, ok := f.Place(JobKey{"default", "j"}, 2, true)
	if !ok || g.Node != "id-n0" || !reflect.DeepEqual(g.GPUs, []string{"n0-6", "n0-7"}) {
		t.Fatalf("got %v ok=%v", g, ok)
	}
	if _, ok := f.Place(JobKey{"default", "k"}, 8, true); !ok {
		t.Fatal("8-GPU job should still fit on n1")
	}
	if _, ok := f.Place(JobKey{"default", "l"}, 1, true); ok {
		t.Fatal("nothing should be free")
	}
}

func TestFreeSkipsUnhealthyAndUnschedulable(t *testing.T) {
	n0, n1 := node8("n0"), node8("n1")
	n0.GPUs[3].Healthy = false
	n1.Schedulable = false
	f := NewFreeGPUs([]Node{n0, n1}, nil)
	if f.Total() != 7 || f.Largest() != 7 {
		t.Fatalf("total=%d largest=%d, want 7 and 7", f.Total(), f.Largest())
	}
	g, _ := f.Place(JobKey{"default", "j"}, 4, true)
	if slices.Contains(g.GPUs, "n0-3") {
		t.Fatalf("placed on an unhealthy GPU: %v", g.GPUs)
	}
}
