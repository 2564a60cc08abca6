package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/stack"
)

var gangRE = regexp.MustCompile(`hello: gang rank (\d+) of (\d+), peers (\S*), master (\S+):(\d+), (\d+) GPUs per node`)

// gangParts returns the running allocations of a gang job that printed
// their gang line and a step, by rank, once there are want of them.
func (m *multiCluster) gangParts(id string, want int) (map[int]*nomadapi.Allocation, map[int]string, error) {
	as, _, err := m.nomad.Jobs().Allocations(id, false, nil)
	if err != nil {
		return nil, nil, err
	}
	allocs, outs := map[int]*nomadapi.Allocation{}, map[int]string{}
	for _, stub := range as {
		if stub.ClientStatus != "running" {
			continue
		}
		a, _, err := m.nomad.Allocations().Info(stub.ID, nil)
		if err != nil {
			return nil, nil, err
		}
		out, err := catStdout(m.nomad, a)
		if err != nil {
			return nil, nil, err
		}
		g := gangRE.FindStringSubmatch(out)
		if g == nil || !stepRE.MatchString(out) {
			continue
		}
		var rank int
		fmt.Sscan(g[1], &rank)
		allocs[rank], outs[rank] = a, out
	}
	if len(allocs) != want {
		return nil, nil, fmt.Errorf("%s: %d of %d gang parts run and printed their rank", id, len(allocs), want)
	}
	return allocs, outs, nil
}

// TestGangAcrossNodes runs a 16-GPU job on the 3-client dev cluster (8
// GPUs per node): the planner leases it two equal parts on two nodes, Nomad
// runs one allocation on each, on exactly its part's GPUs, and every part
// starts only once both joined the gang's rendezvous, with its rank and
// the gang's master address. A trial-and-error job of 16 GPUs then
// preempts the gang under FitGpp: both parts checkpoint and stop, and the
// gang resumes whole, from rank 0's checkpoint, when the TE job is done.
func TestGangAcrossNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 4*time.Minute)
	defer cancel()
	began := time.Now()
	m := startMultiCluster(t, ctx)
	st := mustStack(t, "fitgpp", stack.Options{})
	m.runPlanner(t, ctx, st)

	job := trainJob{gpus: 16, steps: 3000, grace: "20s"}.build(t, "gang")
	if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister("gang", true, nil) })

	var parts map[int]*nomadapi.Allocation
	var lines map[int]string
	eventually(t, 60*time.Second, "both parts of the gang run", func() (bool, error) {
		var err error
		parts, lines, err = m.gangParts("gang", 2)
		return err == nil, err
	})
	t.Logf("%s: the 16-GPU gang runs on two nodes", time.Since(began).Round(time.Millisecond))
	l := m.lease(t, "gang")
	if l == nil || len(l.Parts) != 2 {
		t.Fatalf("gang lease %+v: want two parts", l)
	}
	// Each part names its node's driver's gang address (the dev
	// clients' advertise_address), against which the ranks checked the
	// rendezvous records.
	for i, p := range l.Parts {
		if p.Addr != "127.0.0.1" {
			t.Fatalf("gang lease part %d on %s: address %q, want 127.0.0.1", i, p.NodeName, p.Addr)
		}
	}
	checkGang(t, l, parts, lines)
	first := l.LeaseID

	// Preempted whole for a TE job of two nodes' worth.
	te := trainJob{gpus: 16, class: "te", steps: 30}.build(t, "gang-te")
	if _, _, err := m.nomad.Jobs().Register(te, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister("gang-te", true, nil) })
	eventually(t, 60*time.Second, "both parts of the gang stop after their notice", func() (bool, error) {
		for _, a := range parts {
			cur, _, err := m.nomad.Allocations().Info(a.ID, nil)
			if err != nil {
				return false, err
			}
			if !cur.ClientTerminalStatus() {
				return false, fmt.Errorf("part on %s is %s", cur.NodeName, cur.ClientStatus)
			}
		}
		return true, nil
	})
	if out := taskOutput(t, m.nomad, parts[0]); stepOf(checkpointedRE, out) < 0 {
		t.Fatalf("rank 0 did not checkpoint the gang when it was preempted:\n%s", out)
	}
	if out := taskOutput(t, m.nomad, parts[1]); !strings.Contains(out, "(rank 0 checkpoints the gang), exiting") {
		t.Fatalf("rank 1 did not stop when the gang was preempted:\n%s", out)
	}
	t.Logf("%s: the TE job preempted the whole gang", time.Since(began).Round(time.Millisecond))

	// The TE job runs its 3 s and ends; the gang comes back whole.
	eventually(t, 90*time.Second, "the gang runs again on two nodes", func() (bool, error) {
		l := m.lease(t, "gang")
		if l == nil || l.LeaseID == first || l.Revoke != nil {
			return false, fmt.Errorf("gang lease %+v", l)
		}
		var err error
		parts, lines, err = m.gangParts("gang", 2)
		return err == nil, err
	})
	l = m.lease(t, "gang")
	checkGang(t, l, parts, lines)
	out0 := taskOutput(t, m.nomad, parts[0])
	if !strings.Contains(out0, "hello: restart count 1") || !strings.Contains(out0, "hello: resumed from step") {
		t.Fatalf("rank 0 did not resume from the gang's checkpoint:\n%s", out0)
	}
	t.Logf("%s: the gang resumed whole from its checkpoint", time.Since(began).Round(time.Millisecond))
}

// checkGang checks a running gang against its lease: one part per node of
// the lease, each on exactly that part's GPUs (Nomad's device IDs and what
// the task sees), ranks as in the lease, one master for all.
func checkGang(t *testing.T, l *lease.JobLease, parts map[int]*nomadapi.Allocation, outs map[int]string) {
	t.Helper()
	for rank, p := range l.Parts {
		a := parts[rank]
		if a == nil || a.NodeID != p.NodeID {
			t.Fatalf("rank %d runs on %v; the lease's part %d is on %s", rank, a, rank, p.NodeName)
		}
		want := slices.Sorted(slices.Values(p.GPUs))
		var got []string
		if tr := a.AllocatedResources; tr != nil && tr.Tasks["hello"] != nil {
			for _, d := range tr.Tasks["hello"].Devices {
				got = append(got, d.DeviceIDs...)
			}
		}
		if slices.Sort(got); !slices.Equal(got, want) || len(want) != 8 {
			t.Fatalf("rank %d: Nomad allocated %v, the lease's part names %v", rank, got, want)
		}
		checkSeesLeased(t, fmt.Sprintf("rank %d", rank), outs[rank], want)
		g, g0 := gangRE.FindStringSubmatch(outs[rank]), gangRE.FindStringSubmatch(outs[0])
		if g[1] != fmt.Sprint(rank) || g[2] != "2" || g[6] != "8" || g[4] != "127.0.0.1" {
			t.Fatalf("rank %d printed %q: want rank %d of a gang of 2, 8 GPUs per node, master 127.0.0.1", rank, g[0], rank)
		}
		if g[5] != g0[5] {
			t.Fatalf("rank %d's master port %s differs from rank 0's %s", rank, g[5], g0[5])
		}
	}
}
