package devstack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// stopTasksTimeout bounds how long Close waits for the clients' tasks to
// stop (a themis task gets its grace period, cut to this).
const stopTasksTimeout = 60 * time.Second

// StopTasks stops every allocation on the nodes of the running clients, as
// `nomad node drain -force` does (every task gets its kill_timeout; a themis
// task gets its checkpoint signal and grace period), and waits up to timeout
// until none of them runs. The nodes stay drained (ineligible). A client that
// is not -dev leaves its tasks running when it stops, so Close calls this
// first.
func (c *Cluster) StopTasks(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg := nomadapi.DefaultConfig()
	cfg.Address, cfg.SecretID = c.NomadAddr(), c.s.tokens.Management
	nomad, err := nomadapi.NewClient(cfg)
	if err != nil {
		return err
	}
	var running []string
	for _, cl := range c.clients {
		if cl.cmd != nil {
			running = append(running, cl.node)
		}
	}
	q := (&nomadapi.QueryOptions{}).WithContext(ctx)
	stubs, _, err := nomad.Nodes().List(q)
	if err != nil {
		return fmt.Errorf("devstack: list nodes to drain: %w", err)
	}
	var ids []string
	for _, n := range stubs {
		if slices.Contains(running, n.Name) && n.Status == "ready" {
			ids = append(ids, n.ID)
		}
	}
	force := &nomadapi.DrainOptions{DrainSpec: &nomadapi.DrainSpec{Deadline: -1}}
	for _, id := range ids {
		if _, err := nomad.Nodes().UpdateDrainOpts(id, force, (&nomadapi.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("devstack: drain node %s: %w", id, err)
		}
	}
	var left []string
	for {
		left = left[:0]
		for _, id := range ids {
			as, _, err := nomad.Nodes().Allocations(id, q)
			if err != nil {
				return fmt.Errorf("devstack: allocations of node %s: %w", id, err)
			}
			for _, a := range as {
				if a.ClientStatus == "running" || a.ClientStatus == "pending" {
					left = append(left, a.ID)
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: allocations still running after %s: %s", timeout, strings.Join(left, ", "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Close stops the tasks on the running clients (StopTasks, for up to a
// minute), stops the agents that run, kills what is left in the process
// groups of every client run (plugins), and unmounts what the clients left
// mounted under the data dir (the secrets tmpfs of tasks they did not clean
// up), so that the data dir can be removed. A task that outlives StopTasks
// is left running (its executor runs in a session of its own), and Close
// logs its allocation.
func (c *Cluster) Close() {
	if c.ClientsRunning() > 0 {
		if err := c.StopTasks(context.Background(), stopTasksTimeout); err != nil {
			c.s.cfg.Log.Warn("could not stop every task before stopping the clients", "error", err)
		}
	}
	c.s.Stop()
	for _, cl := range c.clients {
		cl.cmd = nil
	}
	c.server = nil
	for _, pgid := range c.pgids {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		unreap(pgid)
	}
	c.pgids = nil
	if err := unmountUnder(c.s.cfg.DataDir); err != nil {
		c.s.cfg.Log.Warn("could not unmount everything under the data dir", "dir", c.s.cfg.DataDir, "error", err)
	}
}

// ClientsRunning is how many client agents run.
func (c *Cluster) ClientsRunning() int {
	n := 0
	for _, cl := range c.clients {
		if cl.cmd != nil {
			n++
		}
	}
	return n
}
