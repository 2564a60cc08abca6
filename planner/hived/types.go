package hived

import (
	"errors"
	"sort"

	"github.com/themis-nomad/themis/planner/core"
)

// Opportunistic is the priority of opportunistic jobs. Any negative priority
// is opportunistic; zero and above are guaranteed.
const Opportunistic = -1

// DefaultGPUType is the leaf cell type's name when a Config names none.
const DefaultGPUType = "gpu"

// Errors Allocate and Reconfigure wrap; test them with errors.Is.
var (
	// ErrNoCapacity: the job does not fit now (its VC's free cells cannot
	// hold it, even preempting lower-priority jobs of the VC; or, for an
	// opportunistic job, too few idle healthy GPUs lie close enough); for
	// Adopt, its VC's cells cannot hold it on its GPUs.
	ErrNoCapacity = errors.New("no capacity")
	// ErrUnknownVC: the request names a VC the configuration does not have.
	ErrUnknownVC = errors.New("unknown virtual cluster")
	// ErrInvalidRequest: a malformed request (no GPUs, a job already
	// allocated, an unknown GPU; for Adopt also a GPU held or listed twice,
	// a size mismatch, an unknown virtual GPU).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrInfeasible: the VCs' cells cannot all be carved from the cluster.
	ErrInfeasible = errors.New("infeasible VC assignment")
)

// Request asks for a gang of GPUs for one job.
type Request struct {
	Job core.JobKey
	// VC is the job's virtual cluster. Guaranteed jobs must name one;
	// opportunistic jobs may leave it empty (it is only recorded).
	VC string
	// GPUs is the gang size: all or nothing.
	GPUs int
	// Priority >= 0 is a guaranteed job, served from its VC's cells; a
	// negative priority (Opportunistic) is an opportunistic job, served from
	// any idle healthy GPUs and preempted when a guaranteed job needs them.
	Priority int
	// SingleNode keeps the whole gang on one node (otherwise a gang goes to
	// the lowest cell that holds it, which may span nodes).
	SingleNode bool
}

// Allocation is the answer to a successful Request.
type Allocation struct {
	Job core.JobKey
	// Grants are the job's GPUs, one grant per node (in topology order),
	// GPU IDs in index order.
	Grants []core.Grant
	// Preempt lists the jobs this allocation took GPUs from, sorted: the
	// caller must stop them. They are already released here (a later
	// Release of them is a no-op). They are opportunistic jobs, or
	// lower-priority guaranteed jobs of the same VC.
	Preempt []core.JobKey
}

// GPUs is the number of GPUs granted.
func (a Allocation) GPUs() int {
	n := 0
	for _, g := range a.Grants {
		n += len(g.GPUs)
	}
	return n
}

// Grant merges the grants into one core.Grant, in the decision core's
// convention: Node is set when all GPUs are on one node, empty otherwise.
func (a Allocation) Grant() core.Grant {
	g := core.Grant{Job: a.Job}
	for _, x := range a.Grants {
		g.GPUs = append(g.GPUs, x.GPUs...)
	}
	if len(a.Grants) == 1 {
		g.Node = a.Grants[0].Node
	}
	return g
}

// CellState is what a cell is doing, for views.
type CellState string

// Cell states, in the order a view reports them: a cell holding a bad GPU is
// "bad" whatever else it holds; else "used" if a job holds one of its GPUs;
// else "reserved" if it lies in a cell bound to a VC (physical) or is bound
// (virtual); else "free".
const (
	StateFree     CellState = "free"
	StateReserved CellState = "reserved"
	StateUsed     CellState = "used"
	StateBad      CellState = "bad"
)

// CellView describes one physical or virtual cell.
type CellView struct {
	// Name is the cell's name. Physical: "cluster", the rack, the node ID,
	// "<node>/<path prefix>" (e.g. "rack0-n03/socket0/switch1/pair1") or
	// the GPU ID. Virtual: "<vc>/<type>.<i>" for the VC's i-th cell, then
	// "/<type>.<j>" per level down, e.g. "research/node8.0/socket4.1".
	Name string
	// Aliases are other names of a physical cell that absorbed its
	// single-child parents (e.g. a rack of one node is named after the node,
	// with the rack's name as an alias). Pins may use any of them.
	Aliases []string `json:",omitempty"`
	// Parent is the parent cell's name ("" for the top).
	Parent string `json:",omitempty"`
	// Type is the cell type's name; empty for an untyped group cell (one
	// whose children differ in type, like a cluster of mixed racks).
	Type  string `json:",omitempty"`
	Level string
	// Node is the node ID of a cell that lies within one node.
	Node  string `json:",omitempty"`
	GPUs  int
	State CellState
	// Used is the number of its GPUs held by jobs; Bad the number of
	// unhealthy GPUs (virtual: GPUs doomed to bad hardware, see the package
	// doc).
	Used, Bad int
	// VC is the VC that owns the cell: for a physical cell, the VC whose
	// cell is bound to it or to a cell above it.
	VC string `json:",omitempty"`
	// Bound is the cell on the other side of the binding, if any.
	Bound  string `json:",omitempty"`
	Pinned bool   `json:",omitempty"`
	// Jobs are the jobs holding GPUs in the cell, sorted.
	Jobs []core.JobKey `json:",omitempty"`
}

// TypeView describes a cell type of the physical cluster.
type TypeView struct {
	Name  string
	Level string
	GPUs  int
	// Child and Count give the structure: Count cells of type Child (empty
	// for the leaf type).
	Child string `json:",omitempty"`
	Count int    `json:",omitempty"`
	// Cells is the number of physical cells of the type.
	Cells int
}

// VCView describes a virtual cluster.
type VCView struct {
	Name string
	// Cells counts the VC's cells by type (pinned ones included).
	Cells map[string]int
	// Pinned lists the physical cells pinned to the VC.
	Pinned []string `json:",omitempty"`
	// GPUs is the VC's guaranteed capacity; Used the GPUs its guaranteed
	// jobs hold; Free the GPUs still free in its cells; Doomed the GPUs lost
	// to bad hardware bound to its cells.
	GPUs, Used, Free, Doomed int
}

// JobView describes an allocated job.
type JobView struct {
	Job      core.JobKey
	VC       string `json:",omitempty"`
	Priority int
	Grants   []core.Grant
	// Cells are a guaranteed job's virtual GPUs ("<vc>/<type>.<i>/...",
	// as in VirtualCells), one per GPU, in the order of the grants' GPUs:
	// what a caller records with the job to replay it exactly (Adopt).
	Cells []string `json:",omitempty"`
}

func sortKeys(keys []core.JobKey) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].ID < keys[j].ID
	})
}
