package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/stack"
)

// A lost allocation is not a dead one (planner/lost.go, driver/gpuholds.go):
// a Nomad client killed with kill -9 (a client that is not -dev, so its
// tasks keep running), or frozen (SIGSTOP: a paused VM, a client that
// stops heartbeating but lives), while its node runs a one-node job and a
// part of a two-node gang, and back (started again, or SIGCONT) after
// Nomad marked its allocations lost. The planner keeps both leases (the
// jobs wait, saying why) until the node, back, reports the old
// allocations stopped; then both jobs run again. The invariant watcher
// runs throughout and must see no violation (on the code before this, the
// kill -9 case saw partial-gang and unleased-gpu: the leases were released
// when Nomad marked the allocations lost, and the jobs granted again while
// the old tasks ran on).
func TestLostClientKilledAndRestarted(t *testing.T) {
	for _, fault := range []struct {
		name        string
		down, back  func(c *devstack.Cluster, i int) error
		restartedAs string
	}{
		{name: "kill -9", down: (*devstack.Cluster).KillClient, back: func(c *devstack.Cluster, i int) error {
			return c.StartClient(env.ctx, i)
		}, restartedAs: "started again"},
		{name: "SIGSTOP", down: func(c *devstack.Cluster, i int) error {
			return syscall.Kill(c.ClientPid(i), syscall.SIGSTOP)
		}, back: func(c *devstack.Cluster, i int) error {
			return syscall.Kill(c.ClientPid(i), syscall.SIGCONT)
		}, restartedAs: "continued"},
	} {
		t.Run(fault.name, func(t *testing.T) {
			lostClient(t, fault.down, fault.back, fault.restartedAs)
		})
	}
}

func lostClient(t *testing.T, down, back func(c *devstack.Cluster, i int) error, restartedAs string) {
	ctx, cancel := context.WithTimeout(env.ctx, 6*time.Minute)
	defer cancel()
	began := time.Now()
	at := func() time.Duration { return time.Since(began).Round(time.Millisecond) }
	cs, cluster := startConsulCluster(t, ctx, "lost", []string{"node-0", "node-1"}, false)
	m := &multiCluster{cluster: cluster, consulAddr: cs.ConsulAddr()}
	m.nomad, m.consul = apiClients(t, cluster.NomadAddr(), cs.ConsulAddr(), "")
	watching(t, ctx, m.nomad, m.consul)
	m.runPlanner(t, ctx, stack.Of(policies.FIFO{}))

	submit := func(id string, gpus int) {
		t.Helper()
		job := trainJob{gpus: gpus, steps: 100000, grace: "5s"}.build(t, id)
		if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
		t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister(id, true, nil) })
	}
	// A 12-GPU gang (6 + 6 on the two nodes), then a 2-GPU job beside one
	// of its parts.
	submit("lost-gang", 12)
	var parts map[int]*nomadapi.Allocation
	eventually(t, 90*time.Second, "both parts of the gang run", func() (bool, error) {
		var err error
		parts, _, err = m.gangParts("lost-gang", 2)
		return err == nil, err
	})
	submit("lost-solo", 2)
	var solo *nomadapi.Allocation
	eventually(t, 60*time.Second, "lost-solo runs", func() (bool, error) {
		var err error
		solo, _, err = m.running("lost-solo")
		return solo != nil, err
	})
	gangLease, soloLease := m.lease(t, "lost-gang"), m.lease(t, "lost-solo")
	var part *nomadapi.Allocation
	for _, a := range parts {
		if a.NodeID == solo.NodeID {
			part = a
		}
	}
	if part == nil || gangLease == nil || soloLease == nil {
		t.Fatalf("want a gang part beside lost-solo on %s: parts %v, leases %+v %+v", solo.NodeName, parts, gangLease, soloLease)
	}
	i := -1
	for j, n := range cluster.Nodes() {
		if n == solo.NodeName {
			i = j
		}
	}
	t.Logf("%s: lost-gang runs on both nodes, lost-solo on %s beside its part; stopping that node's client (pid %d)",
		at(), solo.NodeName, cluster.ClientPid(i))

	if err := down(cluster, i); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a frozen client must thaw for the cluster to stop
		if pid := cluster.ClientPid(i); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	killed := time.Now()
	eventually(t, 90*time.Second, "Nomad to mark the node's allocations lost", func() (bool, error) {
		for _, id := range []string{solo.ID, part.ID} {
			a, _, err := m.nomad.Allocations().Info(id, nil)
			if err != nil {
				return false, err
			}
			if a.ClientStatus != "lost" {
				return false, fmt.Errorf("allocation %s is %s", id[:8], a.ClientStatus)
			}
		}
		return true, nil
	})
	lost := time.Since(killed)
	t.Logf("%s: Nomad marked both allocations lost %s after the client stopped", at(), lost.Round(time.Millisecond))
	// The planner takes both back and holds them: the jobs wait, saying
	// why (the old tasks still run on the node).
	// (Not fatal: the watcher's verdict on what follows is the point.)
	var waiting error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		waiting = nil
		for _, id := range []string{"lost-solo", "lost-gang"} {
			st := readKV[lease.JobStatus](t, m.consul, lease.StatusKey(core.JobKey{Namespace: "default", ID: id}))
			if st == nil || st.State != "revoking" || !strings.Contains(st.Reason, "until the node reports it stopped") {
				waiting = fmt.Errorf("%s: status %+v", id, st)
			}
		}
		if waiting == nil {
			break
		}
	}
	if waiting != nil {
		t.Errorf("the jobs do not wait for the lost node: %v", waiting)
	}
	for _, id := range []string{"lost-solo", "lost-gang"} {
		if st := readKV[lease.JobStatus](t, m.consul, lease.StatusKey(core.JobKey{Namespace: "default", ID: id})); st != nil {
			t.Logf("%s: %s is %s: %s", at(), id, st.State, st.Reason)
		}
	}
	time.Sleep(3 * time.Second)
	restarted := time.Now()
	if err := back(cluster, i); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: client of %s %s %s after it stopped (%s to come back)", at(), solo.NodeName, restartedAs,
		restarted.Sub(killed).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))

	// The node reports its old allocations stopped, and both jobs run
	// again under new leases.
	eventually(t, 60*time.Second, "the returned node to report its old allocations terminal", func() (bool, error) {
		for _, id := range []string{solo.ID, part.ID} {
			a, _, err := m.nomad.Allocations().Info(id, nil)
			if err != nil {
				return false, err
			}
			if a.ClientStatus != "complete" && a.ClientStatus != "failed" {
				return false, fmt.Errorf("allocation %s is %s", id[:8], a.ClientStatus)
			}
		}
		return true, nil
	})
	reported := time.Since(restarted)
	eventually(t, 120*time.Second, "both jobs to run again under new leases", func() (bool, error) {
		gl, sl := m.lease(t, "lost-gang"), m.lease(t, "lost-solo")
		if gl == nil || sl == nil || gl.LeaseID == gangLease.LeaseID || sl.LeaseID == soloLease.LeaseID || gl.Revoke != nil || sl.Revoke != nil {
			return false, fmt.Errorf("leases %+v %+v", gl, sl)
		}
		if _, _, err := m.gangParts("lost-gang", 2); err != nil {
			return false, err
		}
		a, _, err := m.running("lost-solo")
		if err != nil || a.ID == solo.ID {
			return false, err
		}
		return true, nil
	})
	t.Logf("%s: the node reported its old allocations stopped %s after its client came back; both jobs run again %s after",
		at(), reported.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	time.Sleep(5 * time.Second) // the watcher looks at the cluster as it runs again
}
