package themis

import "math"

// CurrentRho is the app's current ρ estimate, the one round-by-round
// filtering sorts on (section 3.3.2: "the 1-f fraction of total active apps
// with the greatest values of current estimate of their finish-time fair
// metric ρ"). The paper does not say how it is estimated for an app that
// holds nothing. ρ_old (RhoWait) is the wrong yardstick across apps: it
// assumes the fewest GPUs the app can run on, so a sweep of many gangs
// that would run one after another on one gang's GPUs gets a huge ρ_old
// and wins every filter, while a short single-job app that has waited many
// times its ideal finish time never gets in.
//
// So an app with queued jobs is compared by the ρ it would reach if it
// waited one more lease and then got its fair share of the cluster, R_C /
// N_avg GPUs (at least its largest queued gang, at most what its queued
// jobs can use), at the worst placement:
//
//	ρ_now = (T_sh(max(gang, min(R_C / N_avg, demand)), cross-rack) + lease) / T_id
//
// T_id assumes exactly that share, so ρ_now is near 1 for an app that can
// still finish fairly and grows with the time it has waited relative to its
// own T_id: a 1-minute job that waited 10 minutes ranks above a day-long
// sweep that waited an hour. An app with nothing queued is at its ρ with
// what it holds (Rho(0)), as in RhoWait.
func (a *App) CurrentRho(env Env) float64 {
	tid := a.IdealTime(env.ClusterGPUs)
	m := a.minGPUs()
	switch {
	case m == 0:
		return a.SharedTime(0, SameMachine) / tid
	case m > env.ClusterGPUs:
		return math.Inf(1)
	}
	demand := 0
	for i := range a.Jobs {
		if a.Jobs[i].Held == 0 {
			demand += a.Jobs[i].Demand
		}
	}
	share := int(float64(env.ClusterGPUs) / max(1, a.NAvg))
	k := max(m, min(share, demand, env.ClusterGPUs))
	return (a.SharedTime(k, CrossRack) + env.Lease) / tid
}
