package core

import (
	"fmt"
	"strings"
	"testing"
)

// nodeN is a node of n GPUs in rack, all in one cell.
func nodeN(name, rack string, n int) Node {
	nd := Node{ID: "id-" + name, Name: name, Rack: rack, Schedulable: true}
	for i := 0; i < n; i++ {
		nd.GPUs = append(nd.GPUs, GPU{ID: fmt.Sprintf("%s-%d", name, i), Index: i, Healthy: true})
	}
	return nd
}

func TestShape(t *testing.T) {
	mixed := []Node{nodeN("a", "r0", 8), nodeN("b", "r0", 8), nodeN("c", "r1", 8), nodeN("d", "r1", 4)}
	cases := []struct {
		k, nodes, per int
		ok            bool
	}{
		{k: 3, nodes: 1, per: 3, ok: true},
		{k: 8, nodes: 1, per: 8, ok: true},
		{k: 16, nodes: 2, per: 8, ok: true},
		{k: 12, nodes: 2, per: 6, ok: true},
		{k: 24, nodes: 3, per: 8, ok: true},
		{k: 9, nodes: 3, per: 3, ok: true},
		{k: 28, nodes: 4, per: 7, ok: false}, // d has only 4: no 4 nodes of 7
		{k: 17, ok: false},
		{k: 40, ok: false},
		{k: 0, ok: false},
	}
	x := NewClusterIndex(mixed)
	for _, c := range cases {
		n, per, ok := x.Shape(c.k)
		if ok != c.ok || (ok && (n != c.nodes || per != c.per)) {
			t.Errorf("Shape(%d) = %d x %d, %v; want %d x %d, %v", c.k, n, per, ok, c.nodes, c.per, c.ok)
		}
	}
}

// partsOf groups a grant's GPUs by node, in grant order.
func partsOf(g Grant) []string {
	var out []string
	last := ""
	for _, id := range g.GPUs {
		node := id[:strings.LastIndex(id, "-")]
		if node != last {
			out = append(out, node)
			last = node
		}
	}
	return out
}

func TestEqualPartsPlacement(t *testing.T) {
	three := func() []Node {
		return []Node{nodeN("n0", "rack0", 8), nodeN("n1", "rack0", 8), nodeN("n2", "rack1", 8)}
	}
	cases := []struct {
		name   string
		nodes  []Node
		grants []Grant
		gpus   int
		// want is the nodes of the grant in rank order; nil: not placed.
		want []string
		per  int
	}{
		{name: "a node's worth stays on one node", nodes: three(), gpus: 8, want: []string{"n0"}, per: 8},
		{name: "16 on 8-GPU nodes: two whole nodes of one rack", nodes: three(), gpus: 16, want: []string{"n0", "n1"}, per: 8},
		{name: "24: all three nodes across racks", nodes: three(), gpus: 24, want: []string{"n0", "n1", "n2"}, per: 8},
		{name: "12: 2 x 6 in one rack", nodes: three(), gpus: 12, want: []string{"n0", "n1"}, per: 6},
		{name: "12 with rack0 partly held: 2 x 6 across racks", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3")}, gpus: 12, want: []string{"n1", "n2"}, per: 6},
		{name: "12 with 3 free on n0: best fit leaves n0 for small jobs", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4")}, gpus: 12, want: []string{"n1", "n2"}, per: 6},
		{name: "a small gang never spreads", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4"), grant("y", "id-n1", "n1-0", "n1-1", "n1-2", "n1-3", "n1-4"), grant("z", "id-n2", "n2-0", "n2-1", "n2-2", "n2-3", "n2-4")},
			gpus:   4},
		{name: "16 with one node partly held: waits, no unequal split", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0")}, gpus: 16, want: []string{"n1", "n2"}, per: 8},
		{name: "16 with two nodes partly held: waits", nodes: three(),
			grants: []Grant{grant("x", "id-n0", "n0-0"), grant("y", "id-n1", "n1-0")}, gpus: 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewFreeGPUs(c.nodes, c.grants)
			f.EqualParts()
			g, ok := f.PlaceJob(&Job{Key: JobKey{"default", "gang"}, GPUs: c.gpus}, false)
			if c.want == nil {
				if ok {
					t.Fatalf("placed %v, want wait", g)
				}
				return
			}
			if !ok {
				t.Fatalf("not placed, want %v", c.want)
			}
			if got := partsOf(g); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("parts %v (%v), want %v", got, g.GPUs, c.want)
			}
			if len(g.GPUs) != c.per*len(c.want) {
				t.Fatalf("%d GPUs, want %d x %d", len(g.GPUs), len(c.want), c.per)
			}
			if len(c.want) > 1 && g.Node != "" {
				t.Fatalf("multi-node grant names node %q", g.Node)
			}
		})
	}
}
