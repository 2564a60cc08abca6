package arbiter

import (
	"math"
	"strings"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

func TestKnobs(t *testing.T) {
	k, _ := core.ParseKnobs([]string{"themis.f=0.5", "themis.lease=20m", "themis.lie=app-0001:+20%", "themis.lie_remaining=a:-50%,b:+100%", "themis.filter_remaining=truth", "themis.filter_estimate=fluid"})
	p, err := FromKnobs(k)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fairness != 0.5 || p.Lease != 1200 || p.Lie["app-0001"] != 1.2 || p.LieRemaining["a"] != 0.5 || p.LieRemaining["b"] != 2 || p.FilterRemaining != FilterTruth || p.FilterEstimate != EstimateFluid {
		t.Errorf("f %v lease %v lie %v lie_remaining %v", p.Fairness, p.Lease, p.Lie, p.LieRemaining)
	}
	for _, bad := range []string{"themis.f=2", "themis.lease=-1m", "themis.lie=app", "themis.lie=a:-150%", "themis.lie_remaining=a:-100%", "themis.filter_remaining=yes", "themis.filter_estimate=best"} {
		k, _ := core.ParseKnobs([]string{bad})
		if _, err := FromKnobs(k); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	for v, want := range map[string]string{"current": "", "whole": EstimateWhole, "fluid": EstimateFluid} {
		k, _ := core.ParseKnobs([]string{"themis.filter_estimate=" + v})
		if p, err := FromKnobs(k); err != nil || p.FilterEstimate != want {
			t.Errorf("filter_estimate=%s: %q, %v; want %q", v, p.FilterEstimate, err, want)
		}
	}
}

// FuzzFromKnobs: any themis.f, themis.lease and themis.lie either fail with
// an error naming the knob or give a policy whose settings the rounds can
// use: f in [0, 1], a positive finite lease, and positive finite lie
// factors.
func FuzzFromKnobs(f *testing.F) {
	f.Add("0.8", "10m", "app-0001:+20%")
	f.Add("1", "600", "a:-50%,b:100%")
	f.Add("", "", "")
	f.Add("nan", "1e400", "x:nan%")
	f.Add("0", "-1s", "x:inf%")
	f.Fuzz(func(t *testing.T, fv, lease, lie string) {
		var sets []string
		for _, kv := range [][2]string{{"themis.f", fv}, {"themis.lease", lease}, {"themis.lie", lie}} {
			if kv[1] != "" {
				sets = append(sets, kv[0]+"="+kv[1])
			}
		}
		k, err := core.ParseKnobs(sets)
		if err != nil {
			return
		}
		p, err := FromKnobs(k)
		if err != nil {
			if !strings.Contains(err.Error(), "themis.") {
				t.Fatalf("error names no knob: %v", err)
			}
			return
		}
		if !(p.Fairness >= 0 && p.Fairness <= 1) || !(p.Lease > 0) || math.IsInf(p.Lease, 0) {
			t.Fatalf("f %v, lease %v accepted from %q", p.Fairness, p.Lease, sets)
		}
		for app, x := range p.Lie {
			if !(x > 0) || math.IsInf(x, 0) {
				t.Fatalf("lie factor %v for %q accepted from %q", x, app, sets)
			}
		}
	})
}

// The early-end knobs (themis.revoke* before #34): the new names, the old
// spellings as aliases, either mixed across knobs, and both spellings of
// one knob an error naming both.
func TestEarlyEndKnobNames(t *testing.T) {
	cases := []struct {
		name     string
		set      []string
		on       bool
		rho      float64
		victim   float64
		wantErrs []string
	}{
		{"defaults", nil, true, 1, 1, nil},
		{"new names", []string{"themis.early_end=off", "themis.early_end_rho=0.6", "themis.early_end_victim=target"}, false, 0.6, 0.6, nil},
		{"old names", []string{"themis.revoke=off", "themis.revoke_rho=0.6", "themis.revoke_victim=target"}, false, 0.6, 0.6, nil},
		{"mixed across knobs", []string{"themis.early_end=on", "themis.revoke_rho=0.5", "themis.early_end_victim=target"}, true, 0.5, 0.5, nil},
		{"old victim, new rho", []string{"themis.early_end_rho=0.7", "themis.revoke_victim=1"}, true, 0.7, 1, nil},
		{"both on/off spellings", []string{"themis.early_end=on", "themis.revoke=on"}, false, 0, 0, []string{"themis.early_end", "themis.revoke"}},
		{"both rho spellings", []string{"themis.early_end_rho=0.5", "themis.revoke_rho=0.5"}, false, 0, 0, []string{"themis.early_end_rho", "themis.revoke_rho"}},
		{"both victim spellings", []string{"themis.early_end_victim=1", "themis.revoke_victim=target"}, false, 0, 0, []string{"themis.early_end_victim", "themis.revoke_victim"}},
		{"a bad value names the new key", []string{"themis.early_end=maybe"}, false, 0, 0, []string{`themis.early_end = "maybe"`}},
		{"a bad value names the old key", []string{"themis.revoke=maybe"}, false, 0, 0, []string{`themis.revoke = "maybe"`}},
		{"a bad rho under the new name", []string{"themis.early_end_rho=1.5"}, false, 0, 0, []string{"themis.early_end_rho = 1.5"}},
		{"a bad victim under the new name", []string{"themis.early_end_victim=0.5"}, false, 0, 0, []string{`themis.early_end_victim = "0.5"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := core.ParseKnobs(c.set)
			if err != nil {
				t.Fatal(err)
			}
			p, err := FromKnobs(k)
			if len(c.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("%v accepted: %+v", c.set, p)
				}
				for _, w := range c.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %s", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.EarlyEnd != c.on || p.EarlyEndRho != c.rho || p.EarlyEndVictim != c.victim {
				t.Errorf("%v: early end %v, ρ %v, victim %v; want %v, %v, %v", c.set, p.EarlyEnd, p.EarlyEndRho, p.EarlyEndVictim, c.on, c.rho, c.victim)
			}
			if err := k.Unused(); err != nil {
				t.Errorf("%v: %v", c.set, err)
			}
		})
	}
}
