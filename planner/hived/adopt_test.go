package hived

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
)

// eightGPUNodes is n racks-less 8-GPU nodes n0, n1, ... (socket > pair >
// GPU).
func eightGPUNodes(n int) []core.Node {
	var nodes []core.Node
	for k := 0; k < n; k++ {
		id := fmt.Sprintf("n%d", k)
		node := core.Node{ID: id, Name: id, Rack: "r0", Schedulable: true}
		for i := 0; i < 8; i++ {
			node.GPUs = append(node.GPUs, core.GPU{ID: fmt.Sprintf("%s-g%d", id, i), Index: i, Path: cluster.NodePath(8, i), Healthy: true})
		}
		nodes = append(nodes, node)
	}
	return nodes
}

func mustNew(t *testing.T, nodes []core.Node, vcs ...VCConfig) *Cluster {
	t.Helper()
	c, err := New(nodes, &Config{VCs: vcs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustAlloc(t *testing.T, c *Cluster, req Request) Allocation {
	t.Helper()
	a, err := c.Allocate(req)
	if err != nil {
		t.Fatalf("%+v: %v", req, err)
	}
	return a
}

// TestAdoptErrors: every refusal names the job and why, wraps the right
// error kind, and changes nothing.
func TestAdoptErrors(t *testing.T) {
	nodes := eightGPUNodes(2)
	vcs := []VCConfig{
		{Name: "a", Cells: []CellCount{{Type: "socket4", Count: 1}}},
		{Name: "b", Cells: []CellCount{{Type: "node8", Count: 1}}},
	}
	c := mustNew(t, nodes, vcs...)
	if err := c.Adopt(Request{Job: key("run"), VC: "a", GPUs: 2}, []string{"n0-g0", "n0-g1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Adopt(Request{Job: key("opp"), Priority: Opportunistic}, []string{"n1-g7"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		req   Request
		gpus  []string
		cells []string
		kind  error
		msg   string
	}{
		{"no GPUs", Request{Job: key("x"), VC: "a"}, nil, nil, ErrInvalidRequest, "adopts no GPUs"},
		{"size mismatch", Request{Job: key("x"), VC: "a", GPUs: 2}, []string{"n0-g2"}, nil, ErrInvalidRequest, "asks for 2 GPUs but runs on 1 (n0-g2)"},
		{"already allocated", Request{Job: key("run"), VC: "a"}, []string{"n0-g2"}, nil, ErrInvalidRequest, "already allocated"},
		{"unknown GPU", Request{Job: key("x"), VC: "a"}, []string{"n9-g0"}, nil, ErrInvalidRequest, `unknown GPU "n9-g0"`},
		{"held GPU", Request{Job: key("x"), VC: "a"}, []string{"n0-g1"}, nil, ErrInvalidRequest, "GPU n0-g1 is held by job default/run"},
		{"held by opportunistic", Request{Job: key("x"), VC: "b"}, []string{"n1-g7"}, nil, ErrInvalidRequest, "GPU n1-g7 is held by job default/opp"},
		{"GPU twice", Request{Job: key("x"), VC: "a"}, []string{"n0-g2", "n0-g2"}, nil, ErrInvalidRequest, "GPU n0-g2 is listed twice"},
		{"unknown VC", Request{Job: key("x"), VC: "zz"}, []string{"n0-g2"}, nil, ErrUnknownVC, `"zz"`},
		{"another VC's cell", Request{Job: key("x"), VC: "b"}, []string{"n0-g2"}, nil, ErrNoCapacity,
			`vc "b": GPU n0-g2 lies in cell n0/socket0, bound to vc "a"'s cell a/socket4.0`},
		{"no cell of the type", Request{Job: key("x"), VC: "a"}, []string{"n1-g0", "n1-g1", "n1-g2", "n1-g3", "n1-g4"}, nil, ErrNoCapacity,
			`vc "a": GPU n1-g0: the vc has no unbound cell of a type around it (cells above: gpu, pair2, socket4, node8, rack16)`},
		{"node taken", Request{Job: key("x"), VC: "b"}, []string{"n0-g7"}, nil, ErrNoCapacity,
			`vc "b": GPU n0-g7: no cell around it can be bound to the vc (n0 is not free)`},
		{"cells count", Request{Job: key("x"), VC: "a"}, []string{"n0-g2"}, []string{"a/socket4.0/pair2.1/gpu.0", "a/socket4.0/pair2.1/gpu.1"}, ErrInvalidRequest, "2 virtual GPUs for 1 GPUs"},
		{"cells of an opportunistic job", Request{Job: key("x"), Priority: Opportunistic}, []string{"n0-g2"}, []string{"a/socket4.0/pair2.1/gpu.0"}, ErrInvalidRequest, "opportunistic job has no virtual GPUs"},
		{"cells of another VC", Request{Job: key("x"), VC: "a"}, []string{"n0-g2"}, []string{"b/node8.0/socket4.0/pair2.0/gpu.0"}, ErrInvalidRequest, `not vc "a"'s`},
		{"no such virtual cell", Request{Job: key("x"), VC: "a"}, []string{"n0-g2"}, []string{"a/socket4.0/pair2.7/gpu.0"}, ErrInvalidRequest, `no virtual cell "a/socket4.0/pair2.7/gpu.0"`},
		{"virtual GPU held", Request{Job: key("x"), VC: "a"}, []string{"n0-g2"}, []string{"a/socket4.0/pair2.0/gpu.0"}, ErrNoCapacity, "is held by job default/run"},
		{"virtual cell bound elsewhere", Request{Job: key("x"), VC: "a"}, []string{"n0-g4"}, []string{"a/socket4.0/pair2.1/gpu.0"}, ErrNoCapacity,
			"virtual cell a/socket4.0 is bound to n0/socket0, not to n0/socket1 around GPU n0-g4"},
		{"virtual cell far away", Request{Job: key("x"), VC: "b"}, []string{"n0-g2"}, []string{"b/node8.0/socket4.0/pair2.0/gpu.0"}, ErrNoCapacity, "is bound to vc"},
	} {
		before := snap(c)
		err := c.Adopt(tc.req, tc.gpus, tc.cells)
		if err == nil || !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.req.Job.String()) {
			t.Errorf("%s: error %v, want %v containing %q and the job", tc.name, err, tc.kind, tc.msg)
		}
		if after := snap(c); !reflect.DeepEqual(before, after) {
			t.Errorf("%s: the failed Adopt changed the cluster", tc.name)
		}
		if err := check(c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
}

// TestAdoptBadGPU: a job keeps a GPU that went bad; a replay records it
// there.
func TestAdoptBadGPU(t *testing.T) {
	nodes := eightGPUNodes(1)
	nodes[0].GPUs[3].Healthy = false
	c := mustNew(t, nodes, VCConfig{Name: "a", Cells: []CellCount{{Type: "socket4", Count: 1}}})
	if err := c.Adopt(Request{Job: key("j"), VC: "a"}, []string{"n0-g2", "n0-g3"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := check(c); err != nil {
		t.Fatal(err)
	}
	if v := c.VCs()[0]; v.Used != 2 || v.Free != 2 {
		t.Fatalf("vc a: %+v, want 2 used, 2 free", v)
	}
}

// TestAdoptSeniority: jobs adopted in grant order keep their seniority,
// which decides the victim among a VC's jobs of one priority (the newest);
// adopted in another order they would not.
func TestAdoptSeniority(t *testing.T) {
	nodes := eightGPUNodes(1)
	vc := VCConfig{Name: "a", Cells: []CellCount{{Type: "node8", Count: 1}}}
	orig := mustNew(t, nodes, vc)
	mustAlloc(t, orig, Request{Job: key("old"), VC: "a", GPUs: 4})
	mustAlloc(t, orig, Request{Job: key("new"), VC: "a", GPUs: 4})
	replay := func(order ...string) *Cluster {
		c := mustNew(t, nodes, vc)
		for _, k := range order {
			jv, _ := orig.Job(key(k))
			if err := c.Adopt(Request{Job: jv.Job, VC: jv.VC, Priority: jv.Priority}, jv.Grants[0].GPUs, jv.Cells); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	inOrder, reversed := replay("old", "new"), replay("new", "old")
	req := Request{Job: key("urgent"), VC: "a", GPUs: 4, Priority: 1}
	want := mustAlloc(t, orig, req)
	if !reflect.DeepEqual(want.Preempt, []core.JobKey{key("new")}) {
		t.Fatalf("the original preempts %v, want the newest job", want.Preempt)
	}
	if got := mustAlloc(t, inOrder, req); !reflect.DeepEqual(got, want) {
		t.Fatalf("adopted in grant order: %+v, the original %+v", got, want)
	}
	if got := mustAlloc(t, reversed, req); !reflect.DeepEqual(got.Preempt, []core.JobKey{key("old")}) {
		t.Fatalf("adopted in reverse order: preempts %v, want old (now the newest)", got.Preempt)
	}
}

// TestAdoptOpportunistic: an opportunistic job replayed inside a VC's cell
// is preempted when the VC needs the GPU, as it would have been.
func TestAdoptOpportunistic(t *testing.T) {
	nodes := eightGPUNodes(1)
	vc := VCConfig{Name: "a", Cells: []CellCount{{Type: "socket4", Count: 2}}}
	orig := mustNew(t, nodes, vc)
	mustAlloc(t, orig, Request{Job: key("g"), VC: "a", GPUs: 2})
	mustAlloc(t, orig, Request{Job: key("o"), GPUs: 6, Priority: Opportunistic})
	re, err := rebuild(orig, true)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Job: key("g2"), VC: "a", GPUs: 4}
	want := mustAlloc(t, orig, req)
	got := mustAlloc(t, re, req)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(want.Preempt, []core.JobKey{key("o")}) {
		t.Fatalf("rebuilt %+v, the original %+v (want o preempted)", got, want)
	}
}

// TestAdoptWithoutCells is the smallest case where a replay without the
// jobs' virtual GPUs (JobView.Cells) decides differently: VC a owns a node8
// and a pair2 cell; job j1 (2 GPUs) takes the pair2 cell, j2 (1 GPU) then
// the node8 cell; j1 ends. Replayed without cells, j2's GPU binds the
// smallest cell type around it the VC has, pair2, leaving node8 free: an
// 8-GPU single-node job then fits, where in the original cluster it does
// not (the node8 cell holds j2). With the cells, the replay is exact.
func TestAdoptWithoutCells(t *testing.T) {
	nodes := eightGPUNodes(2)
	vc := VCConfig{Name: "a", Cells: []CellCount{{Type: "node8", Count: 1}, {Type: "pair2", Count: 1}}}
	orig := mustNew(t, nodes, vc)
	mustAlloc(t, orig, Request{Job: key("j1"), VC: "a", GPUs: 2})
	mustAlloc(t, orig, Request{Job: key("j2"), VC: "a", GPUs: 1})
	orig.Release(key("j1"))
	j2, _ := orig.Job(key("j2"))
	if !reflect.DeepEqual(j2.Cells, []string{"a/node8.0/socket4.0/pair2.0/gpu.0"}) {
		t.Fatalf("j2 runs in %v, want the node8 cell", j2.Cells)
	}
	req := Request{Job: key("big"), VC: "a", GPUs: 8, SingleNode: true}
	for _, exact := range []bool{true, false} {
		c := mustNew(t, nodes, vc)
		cells := j2.Cells
		if !exact {
			cells = nil
		}
		if err := c.Adopt(Request{Job: j2.Job, VC: "a", Priority: j2.Priority}, j2.Grants[0].GPUs, cells); err != nil {
			t.Fatal(err)
		}
		_, err := c.Allocate(req)
		if exact && !errors.Is(err, ErrNoCapacity) {
			t.Fatalf("replayed with cells: %v, want no capacity as in the original", err)
		}
		if !exact && err != nil {
			t.Fatalf("replayed without cells: %v, want the job to fit (j2 now sits in the pair2 cell)", err)
		}
	}
	if _, err := orig.Allocate(req); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("the original: %v, want no capacity", err)
	}
}
