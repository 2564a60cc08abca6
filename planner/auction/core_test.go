package auction

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
)

func TestOfferFromNodes(t *testing.T) {
	gpu := func(id string, idx int, path ...string) core.GPU {
		return core.GPU{ID: id, Index: idx, Path: path, Healthy: true}
	}
	nodes := []core.Node{
		{ID: "n2", Name: "b", Rack: "r1", Schedulable: true, GPUs: []core.GPU{
			gpu("b0", 0, "s0", "p0"), gpu("b1", 1, "s1", "p1"), gpu("b2", 2, "s0", "p0"), gpu("b3", 3, "s1", "p1"),
		}},
		{ID: "n1", Name: "a", Rack: "r0", Schedulable: true, GPUs: []core.GPU{gpu("a0", 0), gpu("a1", 1), {ID: "a2", Index: 2}}},
		{ID: "n3", Name: "c", Rack: "r1", Schedulable: false, GPUs: []core.GPU{gpu("c0", 0)}},
		{ID: "n4", Name: "d", Rack: "r1", Schedulable: true, GPUs: []core.GPU{gpu("d0", 0)}},
	}
	grants := []core.Grant{{Job: core.JobKey{Namespace: "ns", ID: "j"}, Node: "n1", GPUs: []string{"a1"}}, {Node: "n4", GPUs: []string{"d0"}}}
	o := OfferFromNodes(nodes, grants)
	want := []Machine{
		{ID: "n1", Rack: "r0", Free: []string{"a0"}},                   // a1 granted, a2 unhealthy
		{ID: "n2", Rack: "r1", Free: []string{"b0", "b2", "b1", "b3"}}, // by topology path
	}
	if len(o.Machines) != len(want) {
		t.Fatalf("offer %+v", o)
	}
	for i := range want {
		m := o.Machines[i]
		if m.ID != want[i].ID || m.Rack != want[i].Rack || !slices.Equal(m.Free, want[i].Free) {
			t.Errorf("machine %d: %+v, want %+v", i, m, want[i])
		}
	}
	// A 2-GPU bundle on n2 takes one PCIe pair.
	p := newPool(o)
	if b, ok := p.place(2, SameMachine); !ok || !slices.Equal(b.gpus(), []string{"b0", "b2"}) {
		t.Errorf("2 GPUs on n2: %v", b.gpus())
	}
}

func TestJobApp(t *testing.T) {
	now := time.Unix(10000, 0)
	j := core.Job{
		Key: core.JobKey{Namespace: "ns", ID: "train"}, GPUs: 4, Submitted: time.Unix(7000, 0),
		Phase: core.Queued, Attained: 4 * 500, Remaining: 1500,
	}
	a, err := JobApp(&j, now, 2, DefaultSensitivity, SameMachine)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	// 1500 s left at full speed of 2000 s in all: T_id = 2000 x N_avg =
	// 4000 s; on its gang in one rack T_sh = 3000 + 1500 x 1.1.
	if got := a.IdealTime(64); !near(got, 4000) {
		t.Errorf("T_id = %v, want 4000", got)
	}
	if got, want := a.Rho(4, SameRack, 64), (3000+1500*1.1)/4000; !near(got, want) {
		t.Errorf("ρ(4, rack) = %v, want %v", got, want)
	}
	if got := a.Rho(3, SameMachine, 64); got <= 1e300 {
		t.Errorf("ρ(3) = %v: a 4-GPU gang cannot run on 3", got)
	}
	j.Phase = core.Granted
	a, _ = JobApp(&j, now, 2, DefaultSensitivity, CrossRack)
	if got, want := a.RhoWait(Env{ClusterGPUs: 64, Lease: 600}), (3000+1500*1.3)/4000; !near(got, want) {
		t.Errorf("running: ρ = %v, want %v", got, want)
	}
	for _, bad := range []core.Job{{GPUs: 0, Remaining: 1}, {GPUs: 2, Remaining: -1}, {GPUs: 2}} {
		if _, err := JobApp(&bad, now, 1, DefaultSensitivity, SameMachine); err == nil {
			t.Errorf("JobApp(%+v) accepted", bad)
		}
	}
	_, err = JobApp(&core.Job{GPUs: 2, Remaining: -1}, now, 1, DefaultSensitivity, SameMachine)
	if err == nil || !strings.Contains(err.Error(), "estimate") {
		t.Errorf("unknown remaining work: %v", err)
	}
}

// TestRoundOnCore wires a core cluster into a round: two racks of two
// 4-GPU nodes, one node busy with a running job, three queued gangs.
func TestRoundOnCore(t *testing.T) {
	var nodes []core.Node
	for i := 0; i < 4; i++ {
		n := core.Node{ID: "n" + string(rune('0'+i)), Name: "node" + string(rune('0'+i)), Rack: "r" + string(rune('0'+i/2)), Schedulable: true}
		for g := 0; g < 4; g++ {
			n.GPUs = append(n.GPUs, core.GPU{ID: n.ID + "g" + string(rune('0'+g)), Index: g, Healthy: true})
		}
		nodes = append(nodes, n)
	}
	now := time.Unix(5000, 0)
	key := func(id string) core.JobKey { return core.JobKey{Namespace: "ns", ID: id} }
	jobs := []core.Job{
		{Key: key("run"), GPUs: 4, Phase: core.Granted, Submitted: time.Unix(0, 0), Attained: 4000, Remaining: 3000},
		{Key: key("big"), GPUs: 4, Phase: core.Queued, Submitted: time.Unix(1000, 0), Remaining: 2000},
		{Key: key("mid"), GPUs: 2, Phase: core.Queued, Submitted: time.Unix(2000, 0), Remaining: 1000},
		{Key: key("one"), GPUs: 1, Phase: core.Queued, Submitted: time.Unix(4000, 0), Remaining: 500},
	}
	grants := []core.Grant{{Job: key("run"), Node: "n0", GPUs: []string{"n0g0", "n0g1", "n0g2", "n0g3"}}}
	var apps []App
	for i := range jobs {
		a, err := JobApp(&jobs[i], now, float64(len(jobs)), DefaultSensitivity, SameMachine)
		if err != nil {
			t.Fatal(err)
		}
		apps = append(apps, a)
	}
	r, err := Round(RoundInput{Apps: apps, Offer: OfferFromNodes(nodes, grants), Env: Env{ClusterGPUs: 16, Lease: DefaultLease}, Fairness: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Participants) != 3 || slices.Contains(r.Participants, "ns/run") {
		t.Fatalf("participants %v, want the three queued jobs", r.Participants)
	}
	got := map[string]Award{}
	for _, a := range r.Awards {
		got[a.App] = a
		if len(a.Jobs) != 1 || a.Jobs[0].Job != a.App || len(a.Spare) != 0 {
			t.Errorf("%s: %+v", a.App, a)
		}
	}
	for id, n := range map[string]int{"ns/big": 4, "ns/mid": 2, "ns/one": 1} {
		if a := got[id]; a.GPUs != n || a.Placed != SameMachine || a.C != 1 || a.Lease != DefaultLease {
			t.Errorf("%s: %+v, want %d GPUs on one machine for the whole lease", id, a, n)
		}
	}
	if len(r.Idle) != 5 {
		t.Errorf("idle %v, want 5 GPUs", r.Idle)
	}
}
