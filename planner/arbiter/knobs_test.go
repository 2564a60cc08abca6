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
