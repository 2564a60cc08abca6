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
