package leased

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/policies"
)

func node8(name string) core.Node {
	n := core.Node{ID: "id-" + name, Name: name, Schedulable: true}
	for i := 0; i < 8; i++ {
		n.GPUs = append(n.GPUs, core.GPU{
			ID:      fmt.Sprintf("%s-%d", name, i),
			Index:   i,
			Path:    []string{fmt.Sprintf("socket%d", i/4), fmt.Sprintf("switch%d", i/2), fmt.Sprintf("pair%d", i/2)},
			Healthy: true,
		})
	}
	return n
}

func job(id string, gpus int, submitted int, phase core.Phase) core.Job {
	return core.Job{Key: core.JobKey{Namespace: "default", ID: id}, GPUs: gpus, Submitted: time.Unix(int64(submitted), 0), Phase: phase}
}

func grant(id, node string, gpus ...string) core.Grant {
	return core.Grant{Job: core.JobKey{Namespace: "default", ID: id}, Node: node, GPUs: gpus}
}

// Under sim.realloc a short job that arrives at a full cluster waits for the
// running job's lease to end (instant SRTF preempts at once), then takes
// its GPUs; the lease end is a change the simulator is asked to decide at.
func TestLeasedPreemptsOnlyAtLeaseEnds(t *testing.T) {
	nodes := []core.Node{node8("n0")}
	long := job("long", 8, 0, core.Granted)
	long.Remaining = 1000
	short := job("short", 8, 1, core.Queued)
	short.Remaining = 10
	st := core.State{Nodes: nodes, Jobs: []core.Job{long, short}, Grants: []core.Grant{grant("long", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7")}}
	preempted := func(d core.Decision) bool {
		for _, a := range d.Actions {
			if p, ok := a.(core.PreemptAction); ok && p.Grant.Job.ID == "long" {
				return true
			}
		}
		return false
	}
	if d := (core.Scheduler{Policy: policies.SRTF{}}).Decide(st, time.Unix(1, 0)); !preempted(d) {
		t.Fatalf("instant srtf: want long preempted at once, got %v", d.Actions)
	}
	p, _, err := Wrap(policies.SRTF{}, 600)
	if err != nil {
		t.Fatal(err)
	}
	l := p.(*Policy)
	// The lease starts when the simulator first sees the job granted.
	var ptrs []*core.Job
	for i := range st.Jobs {
		ptrs = append(ptrs, &st.Jobs[i])
	}
	if next := l.NextChange(time.Unix(0, 0), ptrs); !next.Equal(time.Unix(600, 0)) {
		t.Fatalf("NextChange = %v, want the lease end at 600 s", next)
	}
	if d := (core.Scheduler{Policy: l}).Decide(st, time.Unix(1, 0)); preempted(d) {
		t.Fatalf("leased srtf before the lease end: want nothing preempted, got %v", d.Actions)
	}
	if d := (core.Scheduler{Policy: l}).Decide(st, time.Unix(600, 0)); !preempted(d) {
		t.Fatalf("leased srtf at the lease end: want long preempted, got %v", d.Actions)
	}
}

// A job that still ranks first at its lease end keeps running on a new
// lease.
func TestLeasedRenewsAWinner(t *testing.T) {
	nodes := []core.Node{node8("n0")}
	a := job("a", 8, 0, core.Granted)
	a.Remaining = 10
	b := job("b", 8, 1, core.Queued)
	b.Remaining = 1000
	st := core.State{Nodes: nodes, Jobs: []core.Job{a, b}, Grants: []core.Grant{grant("a", "id-n0", "n0-0", "n0-1", "n0-2", "n0-3", "n0-4", "n0-5", "n0-6", "n0-7")}}
	p, _, _ := Wrap(policies.SRTF{}, 60)
	l := p.(*Policy)
	l.Rank(time.Unix(0, 0), []*core.Job{&st.Jobs[0], &st.Jobs[1]})
	d := (core.Scheduler{Policy: l}).Decide(st, time.Unix(60, 0))
	for _, x := range d.Actions {
		if _, ok := x.(core.PreemptAction); ok {
			t.Fatalf("want a renewed, got %v", d.Actions)
		}
	}
	if e := l.leases[a.Key]; !e.Equal(time.Unix(120, 0)) {
		t.Fatalf("lease of a ends %v, want 120 s", e)
	}
}

func TestFromKnobs(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want float64
		err  string
	}{
		{"", 0, ""}, {"instant", 0, ""}, {"10m", 600, ""}, {"90", 90, ""},
		{"0", 0, "want instant"}, {"-1m", 0, "want instant"}, {"inf", 0, "want instant"}, {"soon", 0, "want instant"},
	} {
		k, _ := core.ParseKnobs([]string{Knob + "=" + tc.v})
		got, err := FromKnobs(k)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.v, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.v, got, err, tc.want)
		}
	}
}

// Only ranking policies are wrapped: non-preemptive ones are returned as
// they are, and policies with promotion or room-making are refused.
func TestWrapScope(t *testing.T) {
	if p, leased, err := Wrap(policies.Gandiva{}, 600); err != nil || leased || p != (policies.Gandiva{}) {
		t.Errorf("gandiva: %v, %v; want it unchanged", p, err)
	}
	tr, err := policies.NewTiresias(false, core.Knobs{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Wrap(tr, 600); err == nil {
		t.Error("tiresias-las: want an error (promotion is not modelled under leases)")
	}
	if p, leased, err := Wrap(policies.NewAppSRTF(), 0); err != nil || leased || p.Name() != "app-srtf" {
		t.Errorf("instant: %v, %v", p, err)
	}
}
