// Package hived is HiveD's layer (OSDI'20) for the decision core: cells,
// virtual clusters (VCs), buddy cell allocation with lazy binding, and
// guaranteed vs opportunistic jobs. It is pure: no I/O (ParseConfig takes
// bytes), no clock, no goroutines; the same calls give the same answers.
//
// # Cells and cell types
//
// New builds the physical cell tree from core.Nodes: the cluster, racks
// (nodes grouped by core.Node.Rack; nodes without a rack hang off the
// cluster), nodes, the cells of core.GPU.Path inside a node (e.g. socket >
// switch > pair), and GPUs, the leaves. A cell with a single child is the same
// set of GPUs as that child, so the two are merged: the child keeps its level
// and name and takes the parent's names as aliases. With the cluster
// package's layouts, an 8-GPU node is node > 2 sockets > 2 pairs > 2 GPUs
// (each PCIe switch holds one pair, so the pair stands for it), a 4-GPU node
// is node > 2 pairs > 2 GPUs, a rack of one node is that node.
//
// A cell type is structural: the leaf type (one GPU, named by the config's
// gpu_type, default "gpu"), or Count cells of one child type at a level. It
// is named "<level><GPUs>": "pair2", "socket4", "node8", "node4", "rack64",
// "cluster512". The level is the path element without its index ("socket0"
// -> "socket"), or node, rack, cluster. Where two structures share a name
// they become "<level><GPUs>-<count>x<child>": in the philly preset the
// racks are "rack64-16xnode4" and "rack64-8xnode8". Types() lists a
// cluster's types. A cell whose children differ in type (a cluster of mixed
// racks, a rack of mixed nodes) is an untyped group: VCs cannot own it, and
// its children are the top cells of the buddy system.
//
// # Virtual clusters
//
// A Config (ParseConfig, FormatConfig) gives each VC a number of cells of
// given types, bound lazily, and optionally physical cells pinned to it for
// good:
//
//	vc "research" {
//	  cells {
//	    type  = "node8"
//	    count = 2
//	  }
//	  cells {
//	    type  = "pair2"
//	    count = 3
//	  }
//	  pin = ["rack0-n03"]
//	}
//
// A VC's cells form its virtual private cluster: each of its cells is a tree
// of the type's shape, and the VC's cells are not near each other (a gang
// larger than any one cell spreads over several, with no affinity promised
// between them). New rejects an assignment whose cells cannot all be carved
// from the cluster (ErrInfeasible), naming the short type and by how much.
//
// # Buddy allocation and lazy binding
//
// A VC's cell is bound to a physical cell of its type only when a job first
// needs a GPU inside it, and unbound when its last job leaves. Binding takes
// a free whole cell of the type, else splits a free cell of a type above
// (its other parts stay free); freeing merges buddies back (buddy.go). Among
// the free cells it prefers, in order: fewer bad GPUs; leaving the healthy
// free cells able to host every other VC's unbound cells; a whole free cell
// over a split (the shallowest split first); fewer GPUs held by
// opportunistic jobs; the fullest parent (which keeps other cells whole). It never makes a choice
// after which the other VCs' unbound cells could not all be placed.
// Inside a bound cell the VC's sub-cells bind lazily too, to same-typed
// physical sub-cells, avoiding bad and opportunistically used GPUs.
//
// # Jobs
//
// Allocate places a gang of GPUs. A guaranteed job (Priority >= 0) is placed
// in its VC's virtual cells by the same rule as in a private cluster of those
// cells: the smallest cell with enough free GPUs (a pair for 2, a node for 8,
// a rack for 16; whole children first for gangs larger than a child). If
// nothing fits, it preempts lower-priority jobs of its VC (lowest priority,
// newest first, keeping those that need not go). Its virtual GPUs are then
// bound, and opportunistic jobs on the physical GPUs are preempted (whole
// gangs). An opportunistic job (Priority < 0) takes idle healthy GPUs by the
// same rule over the physical cells, outside the VCs' bound cells if it can,
// and preempts nothing. Allocate returns the grants (one per node) and the
// jobs to stop; Release frees a job.
//
// A gang that no single node can hold right now spreads over nodes, within
// the smallest cell that holds it, unless the request says SingleNode.
//
// # API
//
//	cfg, err := hived.ParseConfig("vcs.hcl", src)    // or a Config built in code
//	c, err := hived.New(nodes, cfg)                  // cells, VCs, feasibility
//	a, err := c.Allocate(hived.Request{Job: k, VC: "research", GPUs: 8, Priority: 0})
//	// a.Grants: one core.Grant per node; a.Preempt: jobs to stop
//	c.Release(k)
//	c.SetHealthy(gpuID, false)
//	c.Free("research")                                // guaranteed GPUs still free
//	c.Physical(); c.VirtualCells("research")          // views for an API/dashboard
//	c.Types(); c.VCs(); c.Jobs()
//	evicted, err := c.Reconfigure(newCfg)            // keep the jobs that still fit
//	jv, _ := c.Job(k)                                 // jv.Cells: its virtual GPUs, to record
//	err = c.Adopt(req, gpus, jv.Cells)                // replay a running job (restart)
//	quota, err := hived.QuotaCells(demand, nodes, "node8")
//	src = hived.FormatConfig(cfg)
//
// A Cluster is a plain data structure: not safe for concurrent use; its
// callers serialize calls (the simulator and the planner loop do).
//
// # What is guaranteed
//
// Sharing safety: on a healthy cluster, a guaranteed request succeeds in the
// shared cluster exactly when it succeeds in the VC's private cluster (a
// cluster made of the VC's cells alone, running this package) given the same
// sequence of the VC's own requests and releases, with the same choice of
// the VC's jobs to preempt; it preempts only opportunistic jobs besides
// those. A job inside one of the VC's cells gets GPUs with the same affinity
// (the same lowest common cell) as in the private cluster. This holds
// whatever the other VCs and the opportunistic jobs do, because binding
// never fails: the VCs' unbound cells always fit in the free cells (the
// invariant buddy.go keeps), and a bound cell is the VC's alone.
//
// No GPU is ever given to two jobs, nor a bad GPU to a new job. Releasing
// every job (with the same GPUs healthy as at the start) returns every cell
// to the free state it started in.
//
// Bad hardware (SetHealthy): a VC whose bound cells hold no bad GPU is not
// affected by bad GPUs elsewhere as long as the free healthy cells can host
// every VC's unbound cells; binding keeps that so whenever a choice does.
// When it cannot, a VC may be bound to a cell with bad GPUs: the virtual GPUs
// that land on them are doomed (reported as bad in VirtualCells, counted in
// VCView.Doomed) and not offered to jobs; the VC's guarantee then shrinks by
// those GPUs. The same happens when GPUs go bad inside a VC's bound cell. A
// doomed GPU returns when its GPU is healthy again, and a VC's idle cell is
// unbound, so its next binding picks the healthiest cell then (a pinned cell
// stays bound: its bad GPUs stay lost while they are bad). Jobs on a GPU
// that goes bad keep it until released (the caller decides whether to stop
// them).
//
// Not guaranteed: affinity between a VC's different cells; that an
// opportunistic job runs or keeps running; the fewest preemptions across
// VCs (binding avoids opportunistic GPUs where it has a choice, but the
// VC's placement is decided first, as in its private cluster).
//
// Reconfigure switches to a new configuration, keeping the running jobs
// that still fit where they run and reporting the others. QuotaCells splits
// a cell type among VCs by demand, for tools that write configs.
//
// # Replay
//
// A planner that keeps no state across restarts rebuilds its Cluster from
// what it records with each running job (as HiveD's scheduler replays its
// allocated pods): New from the nodes, with the GPUs' current health, and
// the config; then Adopt of every running job, in the order the jobs were
// first granted, with its request (job, VC, priority), its GPUs and its
// virtual GPUs (JobView.Cells, read with Job right after Allocate):
//
//	c, _ := hived.New(nodes, cfg)
//	for _, l := range leasesInGrantOrder {
//		err := c.Adopt(hived.Request{Job: l.Job, VC: l.VC, Priority: l.Priority}, l.GPUs, l.Cells)
//	}
//
// Adoption order is seniority: an adopted job is newer than every job
// allocated or adopted before it, as if allocated then, so among a VC's
// jobs of one priority the last adopted is preempted first.
//
// What replay guarantees: with the cells, the rebuilt cluster is the one
// that never stopped, cell by cell (every binding, free cell and counter),
// and decides every later request the same way (the same GPUs, preempted
// jobs and virtual GPUs), except for one piece of history no job carries:
// virtual GPUs doomed to bad hardware (see Bad hardware) are free again in
// the rebuilt cluster, until a placement binds them to the bad GPU again.
// While the old cluster held doomed GPUs, the rebuilt one may place a job
// on other GPUs of its VC's cells (same success or failure in the
// property test, not a proven guarantee). Without the cells, Adopt binds
// the VC's cells around the job's GPUs itself (the smallest cell type
// holding most of them): every adopted job keeps its GPUs and its VC's
// guarantee, but the VC's cells may bind differently than before, so later
// decisions, even success or failure, can differ, and a later job's
// adoption can fail when an earlier one took a cell around its GPUs.
// TestRestartEquivalence and TestRestartWithoutCells measure both.
package hived
