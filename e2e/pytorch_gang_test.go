package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/stack"
)

// torchGangParts returns the running allocations of a PyTorch gang whose
// workers joined the process group and trained past step, by rank, with
// what each printed, once there are want of them (rank 0 prints the steps).
func (m *multiCluster) torchGangParts(id, skip string, want, step int) (map[int]*nomadapi.Allocation, map[int]string, error) {
	as, _, err := m.nomad.Jobs().Allocations(id, false, nil)
	if err != nil {
		return nil, nil, err
	}
	parts, outs := map[int]*nomadapi.Allocation{}, map[int]string{}
	for _, stub := range as {
		if stub.ClientStatus != "running" || strings.Contains(skip, stub.ID) {
			continue
		}
		out, err := trainStdout(m.nomad, stub.ID)
		if err != nil {
			return nil, nil, err
		}
		g := trainRankRE.FindStringSubmatch(out)
		if g == nil {
			continue
		}
		rank, _ := strconv.Atoi(g[1])
		a, _, err := m.nomad.Allocations().Info(stub.ID, nil)
		if err != nil {
			return nil, nil, err
		}
		parts[rank], outs[rank] = a, out
	}
	if len(parts) != want {
		return nil, nil, fmt.Errorf("%s: %d of %d parts joined the process group", id, len(parts), want)
	}
	if s := curveOf(outs[0]).steps(); len(s) == 0 || s[len(s)-1] < step {
		return nil, nil, fmt.Errorf("%s: rank 0 has not trained past step %d", id, step)
	}
	return parts, outs, nil
}

// TestPyTorchGangOverGloo: a 16-GPU PyTorch job on the 3-client dev
// cluster runs as a gang of two parts, one per node; each part starts
// torchrun through the helper's launcher from the environment the driver
// gives it, and the two workers form one gloo process group (rank by the
// lease's parts, one master) and train with DistributedDataParallel. A
// 16-GPU trial-and-error job preempts the gang under FitGpp: both parts get
// SIGUSR1, both workers stop after the same step, rank 0 checkpoints for
// the gang, both allocations complete (exit 0). When the TE job is done
// the gang resumes whole, every rank from that checkpoint, and ends with
// the same weights as the same two-rank run without a preemption.
func TestPyTorchGangOverGloo(t *testing.T) {
	needTorch(t)
	ctx, cancel := context.WithTimeout(env.ctx, 5*time.Minute)
	defer cancel()
	args := []string{"--log-every", "1"}
	const steps = 500
	ref := referenceRun(t, 2, steps, args...)
	began := time.Now()
	m := startMultiCluster(t, ctx)
	m.runPlanner(t, ctx, mustStack(t, "fitgpp", stack.Options{}))

	job := torchJob{gang: true, gpus: 16, grace: "30s", steps: steps, args: args}.build(t, "torch-gang")
	if _, _, err := m.nomad.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister("torch-gang", true, nil) })
	var parts map[int]*nomadapi.Allocation
	var outs map[int]string
	eventually(t, 2*time.Minute, "both parts form the process group and train", func() (bool, error) {
		var err error
		parts, outs, err = m.torchGangParts("torch-gang", "", 2, 100)
		return err == nil, err
	})
	l := m.lease(t, "torch-gang")
	if l == nil || len(l.Parts) != 2 {
		t.Fatalf("gang lease %+v: want two parts", l)
	}
	port := ""
	for rank, p := range l.Parts {
		a := parts[rank]
		if a.NodeID != p.NodeID {
			t.Fatalf("rank %d runs on node %s; the lease's part %d is on %s", rank, a.NodeID, rank, p.NodeName)
		}
		g := trainRankRE.FindStringSubmatch(outs[rank])
		if g[2] != "2" || g[3] != "gloo" || g[4] != "127.0.0.1" || (port != "" && g[5] != port) {
			t.Fatalf("rank %d printed %q: want rank %d of 2 over gloo, the one master 127.0.0.1:%s", rank, g[0], rank, port)
		}
		port = g[5]
	}
	t.Logf("%s: the 16-GPU gang trains as one gloo process group of two ranks on %s and %s (master port %s)",
		time.Since(began).Round(time.Millisecond), l.Parts[0].NodeName, l.Parts[1].NodeName, port)

	// Preempted whole by a TE job of two nodes' worth.
	te := trainJob{gpus: 16, class: "te", steps: 30}.build(t, "torch-gang-te")
	if _, _, err := m.nomad.Jobs().Register(te, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = m.nomad.Jobs().Deregister("torch-gang-te", true, nil) })
	first := parts[0].ID + "," + parts[1].ID
	var before [2]string
	at := -1
	for rank := range 2 {
		a := waitAllocDone(t, m.nomad, parts[rank].ID, fmt.Sprintf("rank %d of the preempted gang", rank))
		out, err := trainStdout(m.nomad, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		before[rank] = out
		if a.ClientStatus != "complete" {
			t.Fatalf("rank %d's allocation ended %s, want complete (exit 0 after the checkpoint):\n%s\nstderr:\n%s",
				rank, a.ClientStatus, lastLines(out, 5), trainStderr(m.nomad, a.ID))
		}
	}
	if ck := trainCkptRE.FindStringSubmatch(before[0]); ck != nil {
		at, _ = strconv.Atoi(ck[1])
	}
	if at < 0 || at >= steps {
		t.Fatalf("rank 0 did not checkpoint the gang mid-run:\n%s", lastLines(before[0], 5))
	}
	if want := fmt.Sprintf("train: rank 1 stops at step %d (rank 0 checkpoints the gang), exiting", at); !strings.Contains(before[1], want) {
		t.Fatalf("rank 1 did not stop after the same step as rank 0 (%d):\n%s", at, lastLines(before[1], 5))
	}
	t.Logf("%s: the TE job preempted the gang: both ranks stopped after step %d, rank 0 checkpointed", time.Since(began).Round(time.Millisecond), at)

	// The TE job runs its 3 s and ends; the gang comes back whole and
	// every rank resumes from rank 0's checkpoint.
	eventually(t, 2*time.Minute, "the gang runs again and resumes", func() (bool, error) {
		var err error
		parts, outs, err = m.torchGangParts("torch-gang", first, 2, at+1)
		if err != nil {
			return false, err
		}
		// A rank's log reaches Nomad on its own time: rank 1's may still
		// lack its resume line when rank 0 has trained on (seen under load).
		for rank := range 2 {
			if trainResumedRE.FindStringSubmatch(outs[rank]) == nil {
				return false, fmt.Errorf("rank %d has not said where it resumed yet:\n%s", rank, lastLines(outs[rank], 5))
			}
		}
		return true, nil
	})
	for rank := range 2 {
		rs := trainResumedRE.FindStringSubmatch(outs[rank])
		if rs == nil || rs[1] != strconv.Itoa(at) {
			t.Fatalf("rank %d did not resume from step %d:\n%s", rank, at, lastLines(outs[rank], 5))
		}
	}
	var after string
	for rank := range 2 {
		// About 400 DDP steps over gloo: minutes on a loaded 2-core machine.
		a := waitAllocDoneWithin(t, m.nomad, parts[rank].ID, fmt.Sprintf("rank %d of the resumed gang", rank), 3*time.Minute)
		if a.ClientStatus != "complete" {
			t.Fatalf("rank %d of the resumed gang ended %s:\nstderr:\n%s", rank, a.ClientStatus, trainStderr(m.nomad, a.ID))
		}
		if rank == 0 {
			out, err := trainStdout(m.nomad, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			after = out
		}
	}
	t.Logf("%s: the gang resumed whole from step %d and finished", time.Since(began).Round(time.Millisecond), at)
	reference := ref()
	checkContinuity(t, "the PyTorch gang", before[0], after, reference, at)
	writeCurves(t, "gang", at, before[0], after, reference)
}
