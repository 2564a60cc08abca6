package sim

import (
	"math"

	"github.com/themis-nomad/themis/planner/cluster"
	"github.com/themis-nomad/themis/planner/policies"
	"github.com/themis-nomad/themis/planner/trace"
)

// ShareIdeal gives the apps of runs on the same trace (same Result.Trace)
// one T_id each, shared by all those runs: the least of the runs' T_id for
// the app (among runs where it finished), and sets SharedIdeal and
// SharedRho. The paper's T_id multiplies by N_avg, the contention the app
// saw under the policy being measured, so a policy that keeps more apps
// waiting raises every app's T_id and lowers their ρ; with one T_id per
// app, ρ compares finish times alone. The least T_id is the one of the run
// that kept the app's contention lowest, which no policy can raise for
// itself. An app that did not finish has SharedRho +Inf.
func ShareIdeal(results []*Result) {
	best := map[string]map[string]float64{} // trace -> app -> least T_id
	for _, r := range results {
		m := best[r.Trace]
		if m == nil {
			m = map[string]float64{}
			best[r.Trace] = m
		}
		for _, a := range r.Apps {
			if !a.Finished || !(a.Ideal > 0) {
				continue
			}
			if v, ok := m[a.ID]; !ok || a.Ideal < v {
				m[a.ID] = a.Ideal
			}
		}
	}
	for _, r := range results {
		m := best[r.Trace]
		for i := range r.Apps {
			a := &r.Apps[i]
			a.SharedIdeal, a.SharedRho = m[a.ID], math.Inf(1)
			if a.Finished && a.SharedIdeal > 0 {
				a.SharedRho = (a.End - a.Arrival) / a.SharedIdeal
			}
		}
	}
}

// Floors is every app's ρ when it runs alone on the empty cluster (by app
// ID, as AppResult.ID): its jobs at their submit times, later phases after
// earlier ones, each gang consolidated as well as the cluster allows
// (gandiva's placement; alone, nothing waits). The paper's T_id assumes
// linear speed-up over all of the app's work from its arrival, so an app
// whose jobs arrive over time, or whose longest job outlasts that, or whose
// gang cannot sit on one machine, has a floor above 1 that no schedule
// beats. seed is the run's (the models of jobs without one are drawn from
// it).
func Floors(tr *trace.Trace, cl *cluster.Cluster, seed int64) (map[string]float64, error) {
	byApp := map[string][]trace.Job{}
	var order []string
	for _, j := range tr.Jobs {
		id := j.App
		if id == "" {
			id = j.ID
		}
		if _, ok := byApp[id]; !ok {
			order = append(order, id)
		}
		byApp[id] = append(byApp[id], j)
	}
	out := make(map[string]float64, len(order))
	for _, id := range order {
		sub := &trace.Trace{Name: tr.Name, Format: tr.Format, Jobs: byApp[id], Start: tr.Start}
		r, err := Run(Config{Trace: sub, Cluster: cl, Policy: policies.Gandiva{}, Seed: seed})
		if err != nil {
			return nil, err
		}
		out[id] = math.Inf(1)
		if len(r.Apps) == 1 {
			out[id] = r.Apps[0].Rho
		}
	}
	return out, nil
}

// SetFloors copies floors (Floors) into the results' apps.
func SetFloors(r *Result, floors map[string]float64) {
	for i := range r.Apps {
		if f, ok := floors[r.Apps[i].ID]; ok {
			r.Apps[i].Floor = f
		}
	}
}
