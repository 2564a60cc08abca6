package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/stack"
)

// TestGangFitGppTwoVictims: on the 3-client dev cluster (8 GPUs per node)
// three 8-GPU BE jobs hold every node; a 16-GPU TE job, which no single
// preemption makes room for, preempts two of them under FitGpp (equal
// scores: the first two in FIFO order) and runs as two parts on their
// nodes, while the third BE job keeps running on its lease.
func TestGangFitGppTwoVictims(t *testing.T) {
	ctx, cancel := context.WithTimeout(env.ctx, 3*time.Minute)
	defer cancel()
	began := time.Now()
	m := startMultiCluster(t, ctx)
	st := mustStack(t, "fitgpp", stack.Options{})
	m.runPlanner(t, ctx, st)

	ids := []string{"be-1", "be-2", "be-3"}
	for _, id := range ids {
		job := trainJob{gpus: 8, steps: 3000, grace: "5s"}.build(t, id)
		if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister(id, true, nil) })
		time.Sleep(50 * time.Millisecond) // distinct submit times: FIFO order
	}
	allocs := map[string]*nomadapi.Allocation{}
	eventually(t, 60*time.Second, "three BE jobs run, one per node", func() (bool, error) {
		for _, id := range ids {
			a, _, err := m.running(id)
			if err != nil {
				return false, err
			}
			allocs[id] = a
		}
		return true, nil
	})
	leases := map[string]string{}
	for _, id := range ids {
		leases[id] = m.lease(t, id).LeaseID
	}
	t.Logf("%s: three BE jobs run", time.Since(began).Round(time.Millisecond))

	te := trainJob{gpus: 16, class: "te", steps: 300}.build(t, "gang-te")
	if _, _, err := m.nomad.Jobs().Register(te, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister("gang-te", true, nil) })
	eventually(t, 60*time.Second, "the TE gang runs as two parts", func() (bool, error) {
		parts, lines, err := m.gangParts("gang-te", 2)
		if err != nil {
			return false, err
		}
		if l := m.lease(t, "gang-te"); l == nil || len(l.Parts) != 2 {
			return false, fmt.Errorf("gang-te lease %+v", l)
		} else {
			checkGang(t, l, parts, lines)
		}
		return true, nil
	})
	t.Logf("%s: the TE gang runs", time.Since(began).Round(time.Millisecond))
	var stopped []string
	for _, id := range ids {
		cur, _, err := m.nomad.Allocations().Info(allocs[id].ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cur.ClientTerminalStatus() {
			stopped = append(stopped, id)
		}
	}
	if fmt.Sprint(stopped) != "[be-1 be-2]" {
		t.Fatalf("stopped %v, want [be-1 be-2]", stopped)
	}
	if l := m.lease(t, "be-3"); l == nil || l.LeaseID != leases["be-3"] || l.Revoke != nil {
		t.Fatalf("be-3 lost its lease: %+v", l)
	}
}
