package auction

// ProjectedRho is another current ρ estimate for round-by-round filtering
// (the simulator's themis.filter_estimate=fluid): the ρ the app reaches if
// it waits one more lease and then runs all its remaining work on its fair
// share of the cluster in all, the GPUs it holds included, as a fluid:
//
//	ρ_proj = (elapsed + lease + max(T_crit, W / g)) / T_id
//	g      = min(R_C, max(share, largest queued gang))
//
// W is the work of the current jobs (running and queued) and of the later
// phases; T_crit the longest current job at its demand (a running one on
// the GPUs it holds) plus each later phase's jobs at theirs. CurrentRho
// puts the queued jobs on the new GPUs alone, after the GPUs the app holds
// are counted in its share: an app that already holds its share and has
// many trials queued is projected onto one gang's GPUs and looks far
// worse off than it is (a 63-job sweep estimated near 1 finished at ρ
// 0.04). The share is FairShare (R_C / N_avg when unset), as in
// CurrentRho. With nothing queued it is Rho(0), as CurrentRho; +Inf for a
// gang the cluster cannot hold.
func (a *App) ProjectedRho(env Env) float64 {
	return a.rhoAfterWait(env, func(m int) float64 { return a.Elapsed + a.fluidTime(env, m) })
}

// fluidTime is how long the app's remaining work takes on its fair share
// of the cluster in all (at least its largest queued gang, m), no job
// faster than at its demand: ProjectedRho's max(T_crit, W / g).
func (a *App) fluidTime(env Env, m int) float64 {
	work, crit := 0.0, 0.0
	for i := range a.Jobs {
		j := &a.Jobs[i]
		w := j.work()
		work += w
		crit = max(crit, w/float64(max(j.Held, j.Demand)))
	}
	a.phases(func(n int, w float64, d int) {
		work += float64(n) * w
		crit += w / float64(d)
	})
	g := min(float64(env.ClusterGPUs), max(a.share(env), float64(m)))
	return max(crit, work/g)
}
