package auction

import "sort"

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
// waited one more lease and then ran on its fair share of the cluster, at
// the ideal placement:
//
//	ρ_now = (T_sh(k new GPUs, one machine) + lease) / T_id
//	k     = max(largest queued gang, min(share - held, queued demand))
//
// The share is the app's max-min fair share of R_C among the active apps'
// current demands (FairShares: apps that want less than an equal split
// keep what they want, the others split the rest), set by Round in
// App.FairShare; R_C / N_avg when unset. An equal split R_C / N would
// understate what large apps get while many small ones wait (a queued
// 1-GPU job counts as one app but leaves most of its 1/N to others), and
// rank every large app above every small one.
//
// The ideal placement (slowdown 1 for every app) keeps the filter free of
// what an app reports about its placement sensitivity, which the arbiter
// cannot check: with the cross-rack slowdown here, an app that overstated
// it looked worse off, got into every filter and won the big machine round
// after round (Figure 18's lie paid: 15% sooner at X = +100%). Slowdowns
// count only in the auction, where the hidden payments make misreporting
// them not pay.
//
// ρ_now is near 1 for an app that can still finish fairly and grows with
// the time it has waited relative to its own T_id: a 1-minute job that
// waited 10 minutes ranks above a day-long sweep that waited an hour. An
// app with nothing queued is at its ρ with what it holds (Rho(0)), as in
// RhoWait.
func (a *App) CurrentRho(env Env) float64 {
	return a.rhoAfterLease(env, SameMachine, func(m int) int {
		demand, held := 0, 0
		for i := range a.Jobs {
			if a.Jobs[i].Held == 0 {
				demand += a.Jobs[i].Demand
			}
			held += a.Jobs[i].Held
		}
		return max(m, min(int(a.share(env))-held, demand, env.ClusterGPUs))
	})
}

// share is the app's fair share of the cluster's GPUs: FairShare, or
// R_C / N_avg when unset.
func (a *App) share(env Env) float64 {
	if a.FairShare > 0 {
		return a.FairShare
	}
	return float64(env.ClusterGPUs) / max(1, a.NAvg)
}

// CurrentRhoAfter is CurrentRho with a wait of the given seconds instead of
// one lease before the app runs on its fair share: what the app reaches if
// it waits that long (ρ at the ideal placement, free of what it reports).
func (a *App) CurrentRhoAfter(env Env, wait float64) float64 {
	env.Lease = max(wait, 0)
	return a.CurrentRho(env)
}

// demandNow is the most GPUs the app's current jobs can use at once: held
// and queued.
func (a *App) demandNow() int {
	d := 0
	for i := range a.Jobs {
		d += max(a.Jobs[i].Demand, a.Jobs[i].Held)
	}
	return d
}

// SetFairShares sets every app's FairShare to its max-min fair share of
// the cluster's GPUs given what the apps' current jobs can use, as Round
// does for its filter.
func SetFairShares(apps []App, clusterGPUs int) {
	for i, s := range fairShares(apps, clusterGPUs) {
		apps[i].FairShare = s
	}
}

func fairShares(apps []App, clusterGPUs int) []float64 {
	demands := make([]int, len(apps))
	for i := range apps {
		demands[i] = apps[i].demandNow()
	}
	return FairShares(demands, clusterGPUs)
}

// FairShares is the max-min fair split of capacity among demands
// (water-filling): every demand at or below an equal split of what is left
// is met, the rest share equally. Shares are real numbers; they sum to
// min(capacity, sum of demands).
func FairShares(demands []int, capacity int) []float64 {
	out := make([]float64, len(demands))
	idx := make([]int, len(demands))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(x, y int) bool { return demands[idx[x]] < demands[idx[y]] })
	left := float64(max(capacity, 0))
	for n, i := range idx {
		eq := left / float64(len(idx)-n)
		d := float64(max(demands[i], 0))
		if d <= eq {
			out[i] = d
			left -= d
			continue
		}
		for _, j := range idx[n:] {
			out[j] = eq
		}
		break
	}
	return out
}
