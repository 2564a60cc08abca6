package arbiter

import (
	"fmt"
	"testing"

	"github.com/themis-nomad/themis/planner/core"
)

// Why under-claiming progress pays (docs/themis.md, "Lying about progress,
// live"): two identical apps want the one 4-GPU machine; B reports a tenth
// of the work it has left. Its claimed ideal time shrinks tenfold but the
// lease it would wait does not, so its current ρ looks the worse, the
// filter lets it bid alone and it takes the machine that A, first by ID,
// takes when both tell the truth. With themis.filter_remaining=truth (B
// ranked by its true ρ) or as-run (every app ranked by the work it has
// done, not by what it says is left) A gets the machine as without the lie.
func TestProgressLieWinsTheFilter(t *testing.T) {
	nodes := []core.Node{node("n0", "r0", 4), node("n1", "r0", 2), node("n2", "r0", 2)}
	a := core.Job{Key: core.JobKey{Namespace: "sim", ID: "a"}, App: "A", GPUs: 4, Work: 3600, Remaining: 3600, Skew: 1.2, CrossRack: 1.3}
	b := core.Job{Key: core.JobKey{Namespace: "sim", ID: "b"}, App: "B", GPUs: 4, Work: 3600, Remaining: 3600, Skew: 1.2, CrossRack: 1.3, Seq: 1}
	machine, spread := "n0-0+n0-1+n0-2+n0-3", "n1-0+n1-1+n2-0+n2-1"
	for _, c := range []struct {
		name   string
		lie    map[string]float64
		filter string
		want   []string
	}{
		{"truth", nil, "", []string{"a=" + machine, "b=" + spread}},
		{"B claims a tenth", map[string]float64{"B": 0.1}, "", []string{"b=" + machine, "a=" + spread}},
		{"B claims a tenth, filter by truth", map[string]float64{"B": 0.1}, FilterTruth, []string{"a=" + machine, "b=" + spread}},
		{"B claims a tenth, filter as run", map[string]float64{"B": 0.1}, FilterAsRun, []string{"a=" + machine, "b=" + spread}},
		{"B claims ten times", map[string]float64{"B": 10}, "", []string{"a=" + machine, "b=" + spread}},
	} {
		p := New(0.8, 600, nil)
		p.LieRemaining, p.FilterRemaining = c.lie, c.filter
		s := decide(t, p, nodes, []core.Job{a, b}, nil, 0)
		if fmt.Sprint(s.grants) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, s.grants, c.want)
		}
		rep, _ := p.LastRound()
		var bid []string
		for _, ar := range rep.Apps {
			if ar.Bid {
				bid = append(bid, ar.App)
			}
		}
		if winner := map[byte]string{'a': "A", 'b': "B"}[c.want[0][0]]; fmt.Sprint(bid) != fmt.Sprint([]string{winner}) {
			t.Errorf("%s: bidders %v, want the machine's winner %s alone", c.name, bid, winner)
		}
	}
}

// Progress claims count only where trusted (docs/themis.md, "Whose
// progress counts"): an app with a job whose reports the operator does not
// trust (core.Job.UntrustedProgress, live's default) is ranked by the
// filter as-run, whatever the filter knob says, so what it claims to have
// left changes nothing; its bids keep the reports. Live, a lie is in the
// reported total, so here B's job reports a tenth of what it has left.
func TestUntrustedProgressLieGainsNothing(t *testing.T) {
	nodes := []core.Node{node("n0", "r0", 4), node("n1", "r0", 2), node("n2", "r0", 2)}
	machine, spread := "n0-0+n0-1+n0-2+n0-3", "n1-0+n1-1+n2-0+n2-1"
	job := func(id, app string, seq uint64, claimed float64, untrusted bool) core.Job {
		return core.Job{Key: core.JobKey{Namespace: "live", ID: id}, App: app, GPUs: 4, Work: claimed, Remaining: claimed,
			Skew: 1.2, CrossRack: 1.3, Seq: seq, UntrustedProgress: untrusted}
	}
	for _, c := range []struct {
		name string
		a, b core.Job
		want []string
	}{
		{"both trusted, B claims a tenth: B wins", job("a", "A", 0, 3600, false), job("b", "B", 1, 360, false), []string{"b=" + machine, "a=" + spread}},
		{"both untrusted, truthful", job("a", "A", 0, 3600, true), job("b", "B", 1, 3600, true), []string{"a=" + machine, "b=" + spread}},
		{"both untrusted, B claims a tenth", job("a", "A", 0, 3600, true), job("b", "B", 1, 360, true), []string{"a=" + machine, "b=" + spread}},
		{"both untrusted, B claims ten times", job("a", "A", 0, 3600, true), job("b", "B", 1, 36000, true), []string{"a=" + machine, "b=" + spread}},
		{"B alone untrusted, truthful", job("a", "A", 0, 3600, false), job("b", "B", 1, 3600, true), nil},
		{"B alone untrusted, B claims a tenth", job("a", "A", 0, 3600, false), job("b", "B", 1, 360, true), nil},
	} {
		p := New(0.8, 600, nil)
		s := decide(t, p, nodes, []core.Job{c.a, c.b}, nil, 0)
		if c.want != nil && fmt.Sprint(s.grants) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, s.grants, c.want)
		}
		if c.want == nil {
			// B untrusted beside a trusted A: the same answer whatever B claims.
			truth := decide(t, New(0.8, 600, nil), nodes, []core.Job{c.a, job("b", "B", 1, 3600, true)}, nil, 0)
			if fmt.Sprint(s.grants) != fmt.Sprint(truth.grants) {
				t.Errorf("%s: %v, where B's truth gets %v", c.name, s.grants, truth.grants)
			}
		}
	}
}
