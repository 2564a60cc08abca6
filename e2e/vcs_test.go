package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/hived"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
	"github.com/themis-nomad/themis/planner/stack"
)

// vcStack is the fifo stack with examples/vcs/dev-node.hcl's two virtual
// clusters (one socket4 cell each), as `themis planner -policy fifo
// -vc-config examples/vcs/dev-node.hcl` builds it.
func vcStack(t *testing.T) *stack.Stack {
	t.Helper()
	file := filepath.Join(env.root, "examples", "vcs", "dev-node.hcl")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	vcs, err := hived.ParseConfig(file, src)
	if err != nil {
		t.Fatal(err)
	}
	st := mustStack(t, "fifo", stack.Options{Knobs: core.Knobs{}, VCs: vcs})
	return st
}

// HiveD live: an opportunistic job of one team runs on every idle GPU; a
// guaranteed job of the other team reclaims its cell: the opportunistic job
// is preempted with its grace period and the guaranteed job runs inside one
// socket, its lease recording its virtual cells. A guaranteed job of the
// first team then gets the other socket (sharing safety), and a job of an
// unknown virtual cluster is rejected naming the field, alone.
func TestVirtualClustersLive(t *testing.T) {
	useStack(t, vcStack(t))
	opp, vision, speech, stray := "e2e-vc-opportunistic", "e2e-vc-vision", "e2e-vc-speech", "e2e-vc-stray"
	trainJob{gpus: 8, vc: "speech", priority: -1, grace: "5s", steps: 3000}.run(t, opp)
	first := waitRunning(t, opp, 60*time.Second)
	seen := watchLease(t, opp)

	trainJob{gpus: 4, vc: "vision", steps: 3000}.run(t, vision)
	vl := waitLeaseOf(t, vision, 40*time.Second)
	rv := revokeOf(seen())
	if rv == nil || !strings.Contains(rv.Reason, vision) {
		t.Fatalf("the opportunistic job was not revoked for %s: %+v", vision, rv)
	}
	if !allocInfo(t, first.ID).ClientTerminalStatus() {
		t.Fatal("the guaranteed job was granted while the opportunistic job still ran")
	}
	if len(vl.GPUs) != 4 || len(vl.Cells) != 4 || !strings.HasPrefix(vl.Cells[0], "vision/") {
		t.Errorf("vision's lease: gpus %v cells %v, want 4 GPUs in vision's cells", vl.GPUs, vl.Cells)
	}
	idx := gpuIndexes(t)
	if s := socketOf(idx, vl.GPUs); s < 0 {
		t.Errorf("vision's GPUs %v span sockets", vl.GPUs)
	}

	trainJob{gpus: 4, vc: "speech", steps: 3000}.run(t, speech)
	sl := waitLeaseOf(t, speech, 40*time.Second)
	if a, b := socketOf(idx, vl.GPUs), socketOf(idx, sl.GPUs); b < 0 || a == b {
		t.Errorf("speech's GPUs %v: want the other socket than vision's %v", sl.GPUs, vl.GPUs)
	}

	bad := trainJob{gpus: 2, vc: "nope", steps: 10}
	bad.run(t, stray)
	eventually(t, 20*time.Second, stray+" to be rejected", func() (bool, error) {
		st := jobStatus(t, stray)
		return st != nil && st.State == "rejected" && strings.Contains(st.Reason, `themis.vc: virtual cluster "nope" is not configured`), nil
	})
	if st := jobStatus(t, opp); st == nil || st.State != "suspended" || st.Preemptions != 1 {
		t.Errorf("the opportunistic job's status: %+v, want suspended after 1 preemption", st)
	}

	// The API: each VC's cells held by its job, each GPU bound to its
	// VC's cell, the opportunistic job waiting in speech's queue, and its
	// preemption in the log.
	c := &httpapi.Client{Addr: env.apiURL}
	var nodes httpapi.NodesResponse
	eventually(t, 20*time.Second, "/v1/nodes to show both VCs used", func() (bool, error) {
		_, err := c.Get(env.ctx, "/v1/nodes", 0, 0, &nodes)
		return err == nil && len(nodes.VCs) == 2 && nodes.VCs[0].Used == 4 && nodes.VCs[1].Used == 4, err
	})
	for _, n := range nodes.Nodes {
		for _, g := range n.GPUs {
			want := map[string]string{"default/" + vision: "vision", "default/" + speech: "speech"}[g.Job]
			if g.State != httpapi.GPULeased || g.VC != want || !strings.HasPrefix(g.Cell, want+"/") {
				t.Errorf("GPU %+v: want leased in %s's cell", g, want)
			}
		}
	}
	var q httpapi.QueueResponse
	if _, err := c.Get(env.ctx, "/v1/queue?vc=speech", 0, 0, &q); err != nil {
		t.Fatal(err)
	}
	if len(q.VCs) != 1 || len(q.VCs[0].Jobs) != 1 || q.VCs[0].Jobs[0].JobID != opp || q.VCs[0].Jobs[0].State != "suspended" || q.VCs[0].Jobs[0].Position != 1 {
		t.Errorf("speech's queue %+v: want %s suspended at position 1", q.VCs, opp)
	}
	var ds httpapi.DecisionsResponse
	if _, err := c.Get(env.ctx, "/v1/decisions?kind=preempt&job=default/"+opp, 0, 0, &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Decisions) != 1 || !strings.Contains(ds.Decisions[0].Reason, vision) {
		t.Errorf("preemptions of %s: %+v, want one for %s", opp, ds.Decisions, vision)
	}
}

// socketOf is the socket (GPUs 0-3: 0, 4-7: 1) of a set of GPUs, -1 when
// they span both.
func socketOf(idx map[string]int, gpus []string) int {
	s := -1
	for _, g := range gpus {
		k := idx[g] / 4
		if s >= 0 && k != s {
			return -1
		}
		s = k
	}
	return s
}

// twoPoliciesDevNode gives the dev node's two sockets to two teams with
// policies of their own: vision runs FitGpp, speech Tiresias-LAS with one
// threshold at 8 GPU-seconds (2 s of a 4-GPU job).
const twoPoliciesDevNode = `
vc "vision" {
  policy = "fitgpp"
  cells {
    type  = "socket4"
    count = 1
  }
  namespace "*" {}
}
vc "speech" {
  policy = "tiresias-las"
  knobs  = { "tiresias.queues" = "8" }
  cells {
    type  = "socket4"
    count = 1
  }
  namespace "*" {}
}
`

// Two VCs with different policies behave as their policies say, in the same
// planner: in vision (fitgpp) a trial-and-error job preempts the running
// best-effort job, which FIFO would have let it wait for; in speech
// (tiresias-las) a new job preempts the running one that has left the
// first queue. Each newcomer runs in its own VC's cells, one socket, on
// GPUs the victims held; each victim is suspended once, and its revoke
// names its VC's policy and the job it made room for.
func TestVCPoliciesLive(t *testing.T) {
	vcs, err := hived.ParseConfig("two-policies.hcl", []byte(twoPoliciesDevNode))
	if err != nil {
		t.Fatal(err)
	}
	st := mustStack(t, "fifo", stack.Options{Knobs: core.Knobs{}, VCs: vcs})
	useStack(t, st)
	be, te, s1, s2 := "e2e-vcpol-be", "e2e-vcpol-te", "e2e-vcpol-s1", "e2e-vcpol-s2"
	trainJob{gpus: 4, vc: "vision", grace: "3s", steps: 3000}.run(t, be)
	trainJob{gpus: 4, vc: "speech", grace: "3s", steps: 3000}.run(t, s1)
	waitRunning(t, be, 60*time.Second)
	waitRunning(t, s1, 60*time.Second)
	beLease, s1Lease := jobLease(t, be), jobLease(t, s1)
	beSeen, s1Seen := watchLease(t, be), watchLease(t, s1)
	// s1 leaves Tiresias's first queue after 8 GPU-seconds.
	time.Sleep(3 * time.Second)

	trainJob{gpus: 4, vc: "vision", class: "te", steps: 30}.run(t, te)
	trainJob{gpus: 4, vc: "speech", steps: 150}.run(t, s2)
	idx := gpuIndexes(t)
	var granted []string
	for _, c := range []struct {
		victim, newcomer, vc, policy string
		seen                         func() []lease.JobLease
	}{
		{be, te, "vision", "fitgpp", beSeen},
		{s1, s2, "speech", "tiresias-las", s1Seen},
	} {
		l := waitLeaseOf(t, c.newcomer, 30*time.Second)
		rv := revokeOf(c.seen())
		if rv == nil || !strings.Contains(rv.Reason, "preempted by "+c.policy) || !strings.Contains(rv.Reason, c.newcomer) {
			t.Errorf("%s's revoke: %+v, want it preempted by %s for %s", c.victim, rv, c.policy, c.newcomer)
		}
		if len(l.Cells) != 4 || !strings.HasPrefix(l.Cells[0], c.vc+"/") {
			t.Errorf("%s's lease: cells %v, want 4 of %s's", c.newcomer, l.Cells, c.vc)
		}
		if socketOf(idx, l.GPUs) < 0 {
			t.Errorf("%s's GPUs %v span sockets", c.newcomer, l.GPUs)
		}
		granted = append(granted, l.GPUs...)
		eventually(t, 20*time.Second, c.victim+" to be suspended", func() (bool, error) {
			s := jobStatus(t, c.victim)
			return s != nil && s.State == "suspended" && s.Preemptions == 1, nil
		})
	}
	// The newcomers run on the GPUs their victims held (with both victims
	// stopping at once, HiveD may bind either VC's cell to either socket).
	held := append(slices.Clone(beLease.GPUs), s1Lease.GPUs...)
	if got, want := slices.Sorted(slices.Values(granted)), slices.Sorted(slices.Values(held)); !slices.Equal(got, want) {
		t.Errorf("the newcomers got GPUs %v, want those their victims held, %v", got, want)
	}
}
