package httpapi

import (
	"net/http"
	"slices"

	"github.com/themis-nomad/themis/planner"
	"github.com/themis-nomad/themis/planner/hived"
)

// NodesResponse is /v1/nodes: every node with themis GPUs and what each GPU
// is doing, and with virtual clusters each VC's cells.
type NodesResponse struct {
	Policy    string `json:"policy"`
	Placement string `json:"placement"`
	Nodes     []Node `json:"nodes"`
	// VCs is empty without virtual clusters.
	VCs []VC `json:"vcs,omitempty"`
}

// Node is one Nomad node with themis GPUs.
type Node struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Rack string `json:"rack,omitempty"`
	// Schedulable is false when the node is down, draining or
	// ineligible: its free GPUs are not offered.
	Schedulable bool `json:"schedulable"`
	// GPUs counts by state.
	Total    int   `json:"gpus_total"`
	Free     int   `json:"gpus_free"`
	Leased   int   `json:"gpus_leased"`
	Revoking int   `json:"gpus_revoking"`
	Bad      int   `json:"gpus_unhealthy"`
	GPUs     []GPU `json:"gpus"`
}

// GPU states.
const (
	GPUFree      = "free"
	GPULeased    = "leased"
	GPURevoking  = "revoking"
	GPUUnhealthy = "unhealthy"
)

// GPU is one GPU and who holds it.
type GPU struct {
	ID    string   `json:"id"`
	Index int      `json:"index"`
	Path  []string `json:"path"`
	// State is free, leased, revoking (its job is being preempted and
	// still holds it) or unhealthy (and not leased).
	State   string `json:"state"`
	Healthy bool   `json:"healthy"`
	// Job, LeaseID and Deadline name the lease holding it (Deadline: the
	// revoking job's grace period ends).
	Job      string `json:"job,omitempty"`
	LeaseID  string `json:"lease_id,omitempty"`
	Deadline string `json:"deadline,omitempty"`
	// VC is the virtual cluster whose cell is bound to the GPU (or the
	// leasing job's VC), Cell that virtual cell (HiveD).
	VC   string `json:"vc,omitempty"`
	Cell string `json:"cell,omitempty"`
}

// VC is one virtual cluster: its guaranteed capacity and its cells.
type VC struct {
	Name string `json:"name"`
	// Cells counts its cells by type; Pinned names physical cells pinned
	// to it.
	Cells  map[string]int `json:"cells"`
	Pinned []string       `json:"pinned,omitempty"`
	// GPUs is its guaranteed capacity; Used the GPUs its guaranteed jobs
	// hold; Free what is left in its cells; Doomed lost to bad hardware.
	GPUs   int `json:"gpus"`
	Used   int `json:"used"`
	Free   int `json:"free"`
	Doomed int `json:"doomed"`
	// VirtualCells are its cells top-down, each bound (or not) to a
	// physical cell and held (or not) by jobs.
	VirtualCells []Cell `json:"virtual_cells"`
}

// Cell is one of a VC's virtual cells.
type Cell struct {
	Name   string `json:"name"`
	Parent string `json:"parent,omitempty"`
	Type   string `json:"type"`
	Level  string `json:"level"`
	GPUs   int    `json:"gpus"`
	// State is free, used, reserved or bad (hived.CellState).
	State string `json:"state"`
	Used  int    `json:"used"`
	Bad   int    `json:"bad"`
	// Bound is the physical cell it is bound to ("" while unbound), on
	// Node.
	Bound  string   `json:"bound,omitempty"`
	Node   string   `json:"node,omitempty"`
	Pinned bool     `json:"pinned,omitempty"`
	Jobs   []string `json:"jobs,omitempty"`
}

func buildNodes(v planner.View) NodesResponse {
	out := NodesResponse{Policy: v.Policy, Placement: v.Placement, Nodes: []Node{}}
	type holder struct {
		job, lease, vc, deadline string
		revoking                 bool
	}
	held := map[string]holder{}
	for _, l := range v.Leases {
		h := holder{job: l.Namespace + "/" + l.JobID, lease: l.LeaseID, vc: l.VC, revoking: l.Revoke != nil}
		if l.Revoke != nil {
			h.deadline = rfc3339(l.Revoke.Deadline)
		}
		for _, id := range l.GPUs {
			held[id] = h
		}
	}
	for _, n := range v.Nodes {
		node := Node{ID: n.ID, Name: n.Name, Rack: n.Rack, Schedulable: n.Schedulable, GPUs: []GPU{}}
		for _, g := range n.GPUs {
			gpu := GPU{ID: g.ID, Index: g.Index, Path: slices.Clone(g.Path), Healthy: g.Healthy, State: GPUFree}
			if gpu.Path == nil {
				gpu.Path = []string{}
			}
			if c, ok := v.GPUCells[g.ID]; ok {
				gpu.VC, gpu.Cell = c.VC, c.Bound
			}
			h, leased := held[g.ID]
			switch {
			case leased && h.revoking:
				gpu.State = GPURevoking
				node.Revoking++
			case leased:
				gpu.State = GPULeased
				node.Leased++
			case !g.Healthy:
				gpu.State = GPUUnhealthy
				node.Bad++
			default:
				node.Free++
			}
			if leased {
				gpu.Job, gpu.LeaseID, gpu.Deadline = h.job, h.lease, h.deadline
				if gpu.VC == "" {
					gpu.VC = h.vc
				}
			}
			node.GPUs = append(node.GPUs, gpu)
		}
		node.Total = len(node.GPUs)
		out.Nodes = append(out.Nodes, node)
	}
	for _, vc := range v.VCs {
		x := VC{Name: vc.Name, Cells: vc.VCView.Cells, Pinned: vc.Pinned, GPUs: vc.GPUs, Used: vc.Used,
			Free: vc.Free, Doomed: vc.Doomed, VirtualCells: []Cell{}}
		for _, c := range vc.Cells {
			x.VirtualCells = append(x.VirtualCells, cellOf(c))
		}
		out.VCs = append(out.VCs, x)
	}
	return out
}

func cellOf(c hived.CellView) Cell {
	x := Cell{Name: c.Name, Parent: c.Parent, Type: c.Type, Level: c.Level, GPUs: c.GPUs, State: string(c.State),
		Used: c.Used, Bad: c.Bad, Bound: c.Bound, Node: c.Node, Pinned: c.Pinned}
	for _, k := range c.Jobs {
		x.Jobs = append(x.Jobs, jobName(k))
	}
	return x
}

func (s *Server) nodes(_ *http.Request, sn snapshot) (any, int) { return sn.doc.nodes, http.StatusOK }
