package hived

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/core"
)

// step is one operation of a scenario and what it must give.
type step struct {
	do string // alloc, release, bad, good, reconfig
	// alloc: job, vc, gpus, prio, single; release: job; bad/good: gpu;
	// reconfig: config.
	job, vc, gpu, config string
	gpus, prio           int
	single               bool

	err     string   // the error must contain it ("" = success)
	nodes   []string // alloc: the nodes granted, in order (nil = any)
	gpuIDs  []string // alloc: exactly these GPUs (nil = any)
	preempt []string // alloc: the jobs preempted; reconfig: evicted
	check   func(t *testing.T, c *Cluster, a Allocation)
}

type scenario struct {
	name    string
	cluster string // a preset or spec
	config  string // HCL
	steps   []step
}

func (s scenario) run(t *testing.T) {
	cl, err := cluster.FromPresetOrFile(s.cluster)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(s.name+".hcl", []byte(s.config))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cl.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := snap(c)
	for i, st := range s.steps {
		var a Allocation
		var err error
		var got []string
		switch st.do {
		case "alloc":
			prio := st.prio
			a, err = c.Allocate(Request{Job: key(st.job), VC: st.vc, GPUs: st.gpus, Priority: prio, SingleNode: st.single})
			for _, k := range a.Preempt {
				got = append(got, k.ID)
			}
		case "release":
			if !c.Release(key(st.job)) {
				err = errors.New("not allocated")
			}
		case "bad", "good":
			err = c.SetHealthy(st.gpu, st.do == "good")
		case "reconfig":
			var cfg *Config
			if cfg, err = ParseConfig("reconfig.hcl", []byte(st.config)); err == nil {
				var ev []core.JobKey
				ev, err = c.Reconfigure(cfg)
				for _, k := range ev {
					got = append(got, k.ID)
				}
			}
			if err == nil { // the new starting point: the new config on an idle cluster
				fresh, ferr := New(c.nodes, cfg)
				if ferr != nil {
					t.Fatal(ferr)
				}
				start = snap(fresh)
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, st.do)
		}
		if cerr := check(c); cerr != nil {
			t.Fatalf("step %d %+v: inconsistent state: %v", i, st, cerr)
		}
		if st.err != "" {
			if err == nil || !strings.Contains(err.Error(), st.err) {
				t.Fatalf("step %d (%s %s): error %v, want one containing %q", i, st.do, st.job, err, st.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d (%s %s): %v", i, st.do, st.job, err)
		}
		if st.preempt != nil || len(got) > 0 {
			if !reflect.DeepEqual(got, st.preempt) && !(len(got) == 0 && len(st.preempt) == 0) {
				t.Fatalf("step %d (%s %s): preempted/evicted %v, want %v", i, st.do, st.job, got, st.preempt)
			}
		}
		if st.nodes != nil {
			var nodes []string
			for _, g := range a.Grants {
				nodes = append(nodes, g.Node)
			}
			if !reflect.DeepEqual(nodes, st.nodes) {
				t.Fatalf("step %d (%s %s): nodes %v, want %v (grants %v)", i, st.do, st.job, nodes, st.nodes, a.Grants)
			}
		}
		if st.gpuIDs != nil {
			ids := allGPUs(a)
			sort.Strings(ids)
			if !reflect.DeepEqual(ids, st.gpuIDs) {
				t.Fatalf("step %d (%s %s): GPUs %v, want %v", i, st.do, st.job, ids, st.gpuIDs)
			}
		}
		if st.check != nil {
			st.check(t, c, a)
		}
	}
	// Releasing everything (and healing every GPU) restores the start.
	for _, j := range c.Jobs() {
		c.Release(j.Job)
	}
	for id := range c.gpuAt {
		if l := c.gpu(id); !l.healthy && cellHealthyAtStart(start, id) {
			c.SetHealthy(id, true)
		}
	}
	if err := check(c); err != nil {
		t.Fatal(err)
	}
	if got := snap(c); !reflect.DeepEqual(got, start) {
		t.Fatalf("releasing everything did not restore the start")
	}
}

func cellHealthyAtStart(s snapshot, id string) bool {
	for _, v := range s.Physical {
		if v.Name == id {
			return v.State != StateBad
		}
	}
	return false
}

// gpusOf are the named GPUs of node on the cluster package's layouts.
func gpusOf(node string, idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, node+"-g"+string(rune('0'+i)))
	}
	sort.Strings(out)
	return out
}

// sameCell asserts that the allocation's GPUs lie in one cell of the given
// size.
func sameCell(size int) func(t *testing.T, c *Cluster, a Allocation) {
	return func(t *testing.T, c *Cluster, a Allocation) {
		t.Helper()
		if l := lca(c, allGPUs(a)); l.gpus != size {
			t.Fatalf("%v: lowest common cell %s has %d GPUs, want %d", a.Grants, l.name, l.gpus, size)
		}
	}
}

func virtualState(vcName, cellName string, want CellState) func(t *testing.T, c *Cluster, a Allocation) {
	return func(t *testing.T, c *Cluster, a Allocation) {
		t.Helper()
		cells, err := c.VirtualCells(vcName)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range cells {
			if v.Name == cellName {
				if v.State != want {
					t.Fatalf("virtual cell %s: %s (bound to %q), want %s", cellName, v.State, v.Bound, want)
				}
				return
			}
		}
		t.Fatalf("no virtual cell %s", cellName)
	}
}

func vcView(name string, f func(v VCView) bool, what string) func(t *testing.T, c *Cluster, a Allocation) {
	return func(t *testing.T, c *Cluster, a Allocation) {
		t.Helper()
		for _, v := range c.VCs() {
			if v.Name == name {
				if !f(v) {
					t.Fatalf("vc %s: %+v, want %s", name, v, what)
				}
				return
			}
		}
		t.Fatalf("no vc %s", name)
	}
}

const twoNodes8 = `
vc "a" {
  cells {
    type  = "node8"
    count = 1
  }
}
`

func TestScenarios(t *testing.T) {
	scenarios := []scenario{
		{
			name:    "normal operation",
			cluster: "n4g8",
			config: `
vc "a" {
  cells {
    type  = "node8"
    count = 2
  }
}
vc "b" {
  cells {
    type  = "socket4"
    count = 1
  }
  cells {
    type  = "pair2"
    count = 2
  }
}`,
			steps: []step{
				{do: "alloc", job: "j1", vc: "a", gpus: 8, check: sameCell(8)},
				{do: "alloc", job: "j2", vc: "a", gpus: 2, check: sameCell(2)},
				{do: "alloc", job: "j3", vc: "a", gpus: 8, err: `vc "a" has 6 free of its 16 GPUs, not 8 in one cell`},
				{do: "alloc", job: "j4", vc: "a", gpus: 4, check: sameCell(4)},
				{do: "alloc", job: "j5", vc: "a", gpus: 2, check: sameCell(2)},
				{do: "alloc", job: "j6", vc: "a", gpus: 1, err: "no capacity"},
				// b: 3 GPUs go to its socket (the smallest cell with 3).
				{do: "alloc", job: "j7", vc: "b", gpus: 3, check: sameCell(4)},
				// 2 GPUs: one of b's pairs, not the socket's last GPU + another.
				{do: "alloc", job: "j8", vc: "b", gpus: 2, check: sameCell(2)},
				// 3 GPUs now span b's cells: no affinity between them.
				{do: "alloc", job: "j9", vc: "b", gpus: 3, check: vcView("b", func(v VCView) bool { return v.Free == 0 && v.Used == 8 }, "all 8 used")},
				{do: "alloc", job: "j10", vc: "nope", gpus: 1, err: `unknown virtual cluster "nope"`},
				{do: "alloc", job: "j1", vc: "a", gpus: 1, err: "already allocated"},
				{do: "alloc", job: "j11", vc: "a", gpus: 0, err: "asks for 0 GPUs"},
				{do: "alloc", job: "j12", vc: "a", gpus: 17, err: `asks for 17 GPUs, vc "a" owns 16`},
				// Releasing j1 frees a's first node8: it unbinds.
				{do: "release", job: "j1", check: virtualState("a", "a/node8.0", StateFree)},
				{do: "release", job: "j1", err: "not allocated"},
				{do: "alloc", job: "j13", vc: "a", gpus: 8, check: virtualState("a", "a/node8.0", StateUsed)},
			},
		},
		{
			name:    "a gang larger than a node takes whole nodes in one rack",
			cluster: "r2n4g8",
			config: `
vc "big" {
  cells {
    type  = "rack32"
    count = 1
  }
}
vc "other" {
  cells {
    type  = "node8"
    count = 4
  }
}`,
			steps: []step{
				{do: "alloc", job: "j1", vc: "big", gpus: 16, check: func(t *testing.T, c *Cluster, a Allocation) {
					if len(a.Grants) != 2 || len(a.Grants[0].GPUs) != 8 || len(a.Grants[1].GPUs) != 8 {
						t.Fatalf("grants %v, want 2 whole nodes", a.Grants)
					}
					sameCell(32)(t, c, a)
				}},
				// 12 GPUs: one whole node and one socket of another.
				{do: "alloc", job: "j2", vc: "big", gpus: 12, check: func(t *testing.T, c *Cluster, a Allocation) {
					if len(a.Grants) != 2 || len(a.Grants[0].GPUs)+len(a.Grants[1].GPUs) != 12 {
						t.Fatalf("grants %v", a.Grants)
					}
					for _, g := range a.Grants {
						if len(g.GPUs) == 4 {
							if l := lca(c, g.GPUs); l.gpus != 4 {
								t.Fatalf("the 4 GPUs %v are not one socket", g.GPUs)
							}
						}
					}
				}},
				// The other VC's 32-GPU gang spans its four node8 cells.
				{do: "alloc", job: "j3", vc: "other", gpus: 32},
				{do: "alloc", job: "j4", vc: "big", gpus: 4, single: true, check: sameCell(4)},
				{do: "alloc", job: "j5", vc: "big", gpus: 2, single: true, err: "not 2 on one node"},
			},
		},
		{
			name:    "opportunistic jobs are preempted by guaranteed jobs, whole gang",
			cluster: "n2g8",
			config:  twoNodes8,
			steps: []step{
				{do: "alloc", job: "o1", gpus: 8, prio: Opportunistic, nodes: []string{"rack0-n0"}},
				{do: "alloc", job: "o2", gpus: 4, prio: Opportunistic, nodes: []string{"rack0-n1"}},
				{do: "alloc", job: "o3", gpus: 4, prio: Opportunistic, nodes: []string{"rack0-n1"}},
				{do: "alloc", job: "o4", gpus: 1, prio: Opportunistic, err: "0 idle healthy GPUs"},
				// a's node binds where fewer opportunistic GPUs must go: both
				// nodes are full, so it takes the first; o1 goes, whole.
				{do: "alloc", job: "j1", vc: "a", gpus: 2, preempt: []string{"o1"}, nodes: []string{"rack0-n0"}},
				// Opportunistic jobs go outside the VCs' bound cells first.
				{do: "release", job: "o2"},
				{do: "alloc", job: "o5", gpus: 4, prio: Opportunistic, nodes: []string{"rack0-n1"}},
				// ... and into their idle GPUs when nothing else is left.
				{do: "alloc", job: "o6", gpus: 4, prio: Opportunistic, nodes: []string{"rack0-n0"}},
				// a grows into its own node: o6 goes.
				{do: "alloc", job: "j2", vc: "a", gpus: 4, preempt: []string{"o6"}, nodes: []string{"rack0-n0"}},
				{do: "alloc", job: "o7", gpus: 2, prio: Opportunistic, nodes: []string{"rack0-n0"}},
				// A guaranteed gang that needs o7's GPUs preempts only o7.
				{do: "alloc", job: "j3", vc: "a", gpus: 2, preempt: []string{"o7"}},
			},
		},
		{
			name:    "binding avoids opportunistic jobs when it can",
			cluster: "n2g8",
			config:  twoNodes8,
			steps: []step{
				{do: "alloc", job: "o1", gpus: 1, prio: Opportunistic, nodes: []string{"rack0-n0"}},
				{do: "alloc", job: "j1", vc: "a", gpus: 8, nodes: []string{"rack0-n1"}},
			},
		},
		{
			name:    "a higher-priority job preempts lower-priority jobs of its VC, only as needed",
			cluster: "n2g8",
			config:  twoNodes8,
			steps: []step{
				{do: "alloc", job: "j1", vc: "a", gpus: 4, prio: 0},
				{do: "alloc", job: "j2", vc: "a", gpus: 2, prio: 1},
				{do: "alloc", job: "j3", vc: "a", gpus: 2, prio: 0},
				{do: "alloc", job: "j4", vc: "a", gpus: 1, prio: 0, err: "no capacity"},
				// Candidates, lowest priority and newest first: j3, j1, j2.
				// Removing j3 is not enough, removing j1 is; j3 need not go.
				{do: "alloc", job: "j5", vc: "a", gpus: 4, prio: 2, preempt: []string{"j1"}, check: sameCell(4)},
				{do: "alloc", job: "j6", vc: "a", gpus: 2, prio: 1, preempt: []string{"j3"}},
				{do: "alloc", job: "j7", vc: "a", gpus: 2, prio: 1, err: `vc "a" has 0 free of its 8 GPUs, not 2 in one cell`},
				// Equal priority never preempts.
				{do: "alloc", job: "j8", vc: "a", gpus: 8, prio: 2, err: "even preempting its lower-priority jobs (4 GPUs)"},
				{do: "alloc", job: "j9", vc: "a", gpus: 8, prio: 3, preempt: []string{"j2", "j5", "j6"}},
			},
		},
		{
			name:    "bad GPUs: binding avoids them; another VC's bad cell does not hurt",
			cluster: "n4g8",
			config: `
vc "a" {
  cells {
    type  = "node8"
    count = 2
  }
}
vc "b" {
  cells {
    type  = "node8"
    count = 1
  }
}`,
			steps: []step{
				{do: "bad", gpu: "rack0-n0-g3"},
				{do: "alloc", job: "j1", vc: "a", gpus: 8, nodes: []string{"rack0-n1"}},
				{do: "alloc", job: "j2", vc: "b", gpus: 1, nodes: []string{"rack0-n2"}},
				// b's node goes bad under its job: a is not affected.
				{do: "bad", gpu: "rack0-n2-g0"},
				{do: "bad", gpu: "rack0-n2-g5"},
				{do: "alloc", job: "j3", vc: "a", gpus: 8, nodes: []string{"rack0-n3"}},
				// b keeps its bound node; the bad GPU is lost to it, the job on
				// the other bad GPU keeps it.
				{do: "alloc", job: "j4", vc: "b", gpus: 7, err: `vc "b" has 6 free of its 8 GPUs`, check: nil},
				{do: "alloc", job: "j5", vc: "b", gpus: 6, check: vcView("b", func(v VCView) bool { return v.Doomed == 1 && v.Free == 0 }, "1 doomed GPU")},
				// Opportunistic jobs never get a bad GPU: n0 has 7 good ones.
				{do: "alloc", job: "o1", gpus: 7, prio: Opportunistic, nodes: []string{"rack0-n0"}},
				{do: "alloc", job: "o2", gpus: 1, prio: Opportunistic, err: "no capacity"},
				{do: "good", gpu: "rack0-n2-g5", check: vcView("b", func(v VCView) bool { return v.Doomed == 0 && v.Free == 1 }, "the GPU back")},
				{do: "good", gpu: "rack0-n2-g5"},
				{do: "bad", gpu: "no-such-gpu", err: `unknown GPU "no-such-gpu"`},
			},
		},
		{
			name:    "bad GPUs: a VC's idle cell is rebound to a healthy cell",
			cluster: "n4g8",
			config: `
vc "a" {
  cells {
    type  = "node8"
    count = 1
  }
}`,
			steps: []step{
				{do: "alloc", job: "j1", vc: "a", gpus: 1, nodes: []string{"rack0-n0"}},
				{do: "bad", gpu: "rack0-n0-g7"},
				{do: "release", job: "j1"},
				{do: "alloc", job: "j2", vc: "a", gpus: 8, nodes: []string{"rack0-n1"}},
			},
		},
		{
			name:    "bad GPUs: a pinned cell dooms its bad GPUs",
			cluster: "n2g8",
			config: `
vc "p" {
  pin = ["rack0-n0"]
}
vc "q" {
  pin = ["rack0-n1-g0"]
}`,
			steps: []step{
				{do: "bad", gpu: "rack0-n0-g0"},
				{do: "alloc", job: "j1", vc: "p", gpus: 8, err: "1 of its GPUs are lost to bad hardware"},
				{do: "alloc", job: "j2", vc: "p", gpus: 7, nodes: []string{"rack0-n0"}, check: vcView("p", func(v VCView) bool { return v.Doomed == 1 && v.Used == 7 }, "1 doomed GPU")},
				{do: "release", job: "j2", check: vcView("p", func(v VCView) bool { return v.Doomed == 1 && v.Free == 7 }, "still 1 doomed GPU")},
				{do: "bad", gpu: "rack0-n1-g0", check: vcView("q", func(v VCView) bool { return v.Doomed == 1 }, "its one GPU doomed")},
				{do: "alloc", job: "j3", vc: "q", gpus: 1, err: "no capacity"},
				{do: "good", gpu: "rack0-n1-g0"},
				{do: "alloc", job: "j4", vc: "q", gpus: 1, gpuIDs: []string{"rack0-n1-g0"}},
			},
		},
		{
			name:    "relaxed buddy allocation",
			cluster: "r2n2g8",
			config: `
vc "a" {
  cells {
    type  = "pair2"
    count = 3
  }
}
vc "b" {
  cells {
    type  = "node8"
    count = 2
  }
}`,
			steps: []step{
				// a's first pair splits a rack, a node and a socket ...
				{do: "alloc", job: "j1", vc: "a", gpus: 2, gpuIDs: gpusOf("rack0-n0", 0, 1)},
				// ... its second is the first's buddy, which keeps the other
				// socket, node and rack whole.
				{do: "alloc", job: "j2", vc: "a", gpus: 2, gpuIDs: gpusOf("rack0-n0", 2, 3)},
				// b's nodes take whole free nodes, not the split one.
				{do: "alloc", job: "j3", vc: "b", gpus: 16, nodes: []string{"rack0-n1", "rack1-n0"}},
				// Releasing j1 merges its pair back; a bad GPU in the free
				// buddy is avoided by splitting the other socket.
				{do: "release", job: "j1"},
				{do: "bad", gpu: "rack0-n0-g0"},
				{do: "alloc", job: "j4", vc: "a", gpus: 2, gpuIDs: gpusOf("rack0-n0", 4, 5)},
				{do: "alloc", job: "j5", vc: "a", gpus: 2, gpuIDs: gpusOf("rack0-n0", 6, 7)},
			},
		},
		{
			name:    "reconfiguration keeps the jobs that still fit",
			cluster: "n4g8",
			config: `
vc "a" {
  cells {
    type  = "node8"
    count = 2
  }
}
vc "b" {
  cells {
    type  = "node8"
    count = 2
  }
}`,
			steps: []step{
				{do: "alloc", job: "j1", vc: "a", gpus: 8, nodes: []string{"rack0-n0"}},
				{do: "alloc", job: "j2", vc: "a", gpus: 2, nodes: []string{"rack0-n1"}},
				{do: "alloc", job: "j3", vc: "b", gpus: 8, nodes: []string{"rack0-n2"}},
				{do: "alloc", job: "o1", gpus: 2, prio: Opportunistic, nodes: []string{"rack0-n3"}},
				// Infeasible: nothing changes.
				{do: "reconfig", config: `
vc "a" {
  cells {
    type  = "node8"
    count = 5
  }
}`, err: `cell type "node8" is short by 1`},
				// j4 binds b's second node, next to o1, without preempting it.
				{do: "alloc", job: "j4", vc: "b", gpus: 1, nodes: []string{"rack0-n3"}},
				// b goes; a keeps j1 in a node8 and j2 in one of its pairs.
				{do: "reconfig", config: `
vc "a" {
  cells {
    type  = "node8"
    count = 1
  }
  cells {
    type  = "pair2"
    count = 2
  }
}
vc "c" {
  cells {
    type  = "node8"
    count = 2
  }
}`, preempt: []string{"j3", "j4"}, check: func(t *testing.T, c *Cluster, _ Allocation) {
					for _, id := range []string{"j1", "j2", "o1"} {
						if _, ok := c.Job(key(id)); !ok {
							t.Fatalf("job %s was not kept", id)
						}
					}
					virtualState("a", "a/node8.0", StateUsed)(t, c, Allocation{})
					virtualState("a", "a/pair2.1", StateUsed)(t, c, Allocation{})
				}},
				{do: "alloc", job: "j5", vc: "c", gpus: 16, nodes: []string{"rack0-n2", "rack0-n3"}, preempt: []string{"o1"}},
				{do: "alloc", job: "j6", vc: "a", gpus: 2, nodes: []string{"rack0-n1"}},
				{do: "alloc", job: "j7", vc: "a", gpus: 1, err: "no capacity"},
				// A configuration where j1 (8 GPUs) no longer fits.
				{do: "reconfig", config: `
vc "a" {
  cells {
    type  = "pair2"
    count = 2
  }
}`, preempt: []string{"j1", "j5"}},
			},
		},
		{
			name:    "philly: mixed node sizes",
			cluster: "philly-256",
			config: `
vc "research" {
  cells {
    type  = "node8"
    count = 4
  }
  cells {
    type  = "node4"
    count = 2
  }
}
vc "prod" {
  cells {
    type  = "rack64"
    count = 1
  }
  cells {
    type  = "pair2"
    count = 10
  }
}`,
			steps: []step{
				{do: "alloc", job: "j1", vc: "research", gpus: 4, check: sameCell(4)},
				{do: "alloc", job: "j2", vc: "research", gpus: 8, check: sameCell(8)},
				{do: "alloc", job: "j3", vc: "prod", gpus: 64, check: sameCell(64)},
				// prod's pairs come from a 4-GPU node or an 8-GPU node alike.
				{do: "alloc", job: "j4", vc: "prod", gpus: 20},
				{do: "alloc", job: "o1", gpus: 100, prio: Opportunistic},
			},
		},
	}
	for _, s := range scenarios {
		t.Run(s.name, s.run)
	}
}
