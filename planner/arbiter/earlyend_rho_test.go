package arbiter

import (
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

// themis.early_end_rho and themis.early_end_victim on earlyEndScene with S's job
// of 600 s: waiting for the lease end S would reach ρ ≈ 0.66, and A,
// waiting a lease for a1's GPUs, ρ ≈ 0.51. Leases end early for S only
// when the target is below 0.66, and with early_end_victim=target only when
// A stays at or below the target too.
func TestEarlyEndRhoTarget(t *testing.T) {
	for _, c := range []struct {
		knobs []string
		cut   bool
	}{
		{nil, false}, // the default: ρ 0.66 <= 1, S waits
		{[]string{"themis.early_end_rho=1"}, false},
		{[]string{"themis.early_end_rho=0.7"}, false},
		{[]string{"themis.early_end_rho=0.6"}, true},
		{[]string{"themis.early_end_rho=0.6", "themis.early_end_victim=target"}, true},
		{[]string{"themis.early_end_rho=0.45"}, true},
		{[]string{"themis.early_end_rho=0.45", "themis.early_end_victim=1"}, true},
		{[]string{"themis.early_end_rho=0.45", "themis.early_end_victim=target"}, false}, // A at 0.51 > 0.45
		{[]string{"themis.early_end_rho=0.6", "themis.early_end=off"}, false},
	} {
		k, err := core.ParseKnobs(c.knobs)
		if err != nil {
			t.Fatal(err)
		}
		p, err := FromKnobs(k)
		if err != nil {
			t.Fatalf("%v: %v", c.knobs, err)
		}
		nodes, jobs, held := earlyEndScene(t, p)
		jobs[3].Remaining, jobs[3].Work = 600, 600
		s := decide(t, p, nodes, jobs, held, 10)
		got := len(s.preempts) == 1 && len(s.grants) == 1 && strings.HasPrefix(s.grants[0], "s=")
		if !got && len(s.grants)+len(s.preempts) != 0 {
			t.Errorf("%v: %+v, want nothing or a1 preempted and s granted", c.knobs, s)
		}
		if got != c.cut {
			t.Errorf("%v: cut %v (%+v), want %v", c.knobs, got, s, c.cut)
		}
	}
}

func TestEarlyEndRhoKnob(t *testing.T) {
	for _, c := range []struct {
		knobs       []string
		rho, victim float64
	}{
		{nil, 1, 1},
		{[]string{"themis.early_end_rho=0.5"}, 0.5, 1},
		{[]string{"themis.early_end_rho=0.5", "themis.early_end_victim=target"}, 0.5, 0.5},
		{[]string{"themis.early_end_victim=target"}, 1, 1},
	} {
		k, _ := core.ParseKnobs(c.knobs)
		p, err := FromKnobs(k)
		if err != nil || p.EarlyEndRho != c.rho || p.EarlyEndVictim != c.victim {
			t.Errorf("%v: %+v, %v; want early_end_rho %v, victim %v", c.knobs, p, err, c.rho, c.victim)
		}
	}
	for _, bad := range []string{"themis.early_end_rho=0", "themis.early_end_rho=-0.5", "themis.early_end_rho=1.5",
		"themis.early_end_rho=nan", "themis.early_end_rho=inf", "themis.early_end_rho=x", "themis.early_end_victim=0.5"} {
		k, _ := core.ParseKnobs([]string{bad})
		if _, err := FromKnobs(k); err == nil || !strings.Contains(err.Error(), "themis.early_end_") {
			t.Errorf("%s: %v, want an error naming the knob", bad, err)
		}
	}
}
