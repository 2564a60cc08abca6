package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/httpapi"
)

// themis nodes: every node's GPUs, their cells, health and holders.
type nodesCommand struct{ viewCommand }

func (c *nodesCommand) Synopsis() string {
	return "Show the nodes' GPUs: their cells, health, and the job holding each"
}

func (c *nodesCommand) Help() string {
	return strings.TrimSpace(`
Usage: themis nodes [options]

  Lists every node with themis GPUs (whether it takes new work, its GPUs
  by state), then every GPU: its place in the node's topology (or, with
  virtual clusters, the virtual cell bound to it), its state (free,
  leased, revoking: its job is being preempted and stops by the deadline,
  unhealthy), its health and the job and lease holding it. It reads the
  leading planner's API (GET /v1/nodes). Where no planner serves it, it
  lists the leased GPUs from Consul's lease keys (themis/leases/gpus/):
  free and unhealthy GPUs are not in Consul's records.

Options:
` + viewOptionsHelp)
}

func (c *nodesCommand) Run(args []string) int {
	var o viewOptions
	rest, ok := c.parse("nodes", args, &o, nil)
	if !ok || !noArgs(c.ui, "nodes", rest) {
		return 2
	}
	return c.run("nodes", func(ctx context.Context) error {
		var n httpapi.NodesResponse
		served, err := c.get(ctx, o, "/v1/nodes", &n)
		if !served {
			if !isNotServed(err) {
				return err
			}
			store, ferr := c.fallback("nodes", o, err, ", which list only the leased GPUs")
			if ferr != nil {
				return ferr
			}
			if n, err = nodesFromConsul(ctx, store, c.ui.Warn); err != nil {
				return err
			}
		}
		return c.emit(o, n, func(w io.Writer) { printNodes(w, n) })
	})
}

// nodesFromConsul is /v1/nodes as far as the lease keys tell it: the
// leased GPUs by node (revoking where their job's lease is).
func nodesFromConsul(ctx context.Context, store *consul.Store, warn func(string)) (httpapi.NodesResponse, error) {
	out := httpapi.NodesResponse{Nodes: []httpapi.Node{}}
	gpus, err := store.GPULeases(ctx)
	bad, err := consul.Unreadable(err)
	for _, b := range bad {
		warn("left out " + safe(b.String()))
	}
	if err != nil {
		return out, err
	}
	jobs, err := leasesFromConsul(ctx, store, warn)
	if err != nil {
		return out, err
	}
	revoking := map[string]string{}
	for _, l := range jobs.Leases {
		if l.Revoke != nil {
			revoking[l.LeaseID] = l.Revoke.Deadline.UTC().Format("2006-01-02T15:04:05Z07:00")
		}
	}
	at := map[string]int{}
	for _, id := range slices.Sorted(maps.Keys(gpus)) {
		g := gpus[id]
		i, ok := at[g.NodeID]
		if !ok {
			i = len(out.Nodes)
			at[g.NodeID] = i
			out.Nodes = append(out.Nodes, httpapi.Node{ID: g.NodeID, Name: g.NodeName, Schedulable: true, GPUs: []httpapi.GPU{}})
		}
		n := &out.Nodes[i]
		x := httpapi.GPU{ID: g.GPU, Index: -1, Path: []string{}, State: httpapi.GPULeased, Healthy: true,
			Job: g.Namespace + "/" + g.JobID, LeaseID: g.LeaseID, VC: g.VC}
		if d, ok := revoking[g.LeaseID]; ok {
			x.State, x.Deadline = httpapi.GPURevoking, d
			n.Revoking++
		} else {
			n.Leased++
		}
		n.Total++
		n.GPUs = append(n.GPUs, x)
	}
	slices.SortFunc(out.Nodes, func(a, b httpapi.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func printNodes(out io.Writer, n httpapi.NodesResponse) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tRACK\tSCHEDULABLE\tGPUS\tFREE\tLEASED\tREVOKING\tUNHEALTHY")
	for _, x := range n.Nodes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", safe(x.Name), dash(safe(x.Rack)), yesNo(x.Schedulable), x.Total, x.Free, x.Leased, x.Revoking, x.Bad)
	}
	w.Flush()
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tGPU\tID\tCELL\tSTATE\tHEALTH\tHOLDER\tVC\tLEASE\tDEADLINE")
	for _, x := range n.Nodes {
		for _, g := range x.GPUs {
			index, cell, health, deadline := "-", g.Cell, "healthy", "-"
			if g.Index >= 0 {
				index = strconv.Itoa(g.Index)
			}
			if cell == "" {
				cell = strings.Join(g.Path, "/")
			}
			if !g.Healthy {
				health = "unhealthy"
			}
			if t, err := time.Parse(time.RFC3339, g.Deadline); err == nil {
				deadline = clock(t) // as themis leases shows it; -json has the date
			} else if g.Deadline != "" {
				deadline = g.Deadline
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(x.Name), index, safe(g.ID), dash(safe(cell)), g.State, health,
				dash(safe(g.Job)), dash(safe(g.VC)), dash(safe(g.LeaseID)), deadline)
		}
	}
	w.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
