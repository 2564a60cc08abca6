package report

import (
	"slices"

	"github.com/themis-nomad/themis/planner/sim"
)

// Summary is the headline metrics of one run, as written to summary.json.
// Times are in seconds. See docs/simulator.md, "Report files and
// definitions", for definitions and for how undefined values are written.
type Summary struct {
	Policy    string   `json:"policy"`
	Trace     string   `json:"trace"`
	Cluster   string   `json:"cluster"`
	Seed      int64    `json:"seed"`
	TotalGPUs int      `json:"total_gpus"`
	Settings  []string `json:"settings"`

	Jobs     int `json:"jobs"`
	Started  int `json:"started"`
	Finished int `json:"finished"`

	AvgJCT    Num `json:"avg_jct_s"`
	MedianJCT Num `json:"median_jct_s"`
	P95JCT    Num `json:"p95_jct_s"`
	P99JCT    Num `json:"p99_jct_s"`
	MaxJCT    Num `json:"max_jct_s"`

	AvgQueue    Num `json:"avg_queue_s"`
	MedianQueue Num `json:"median_queue_s"`
	P95Queue    Num `json:"p95_queue_s"`

	Makespan    Num `json:"makespan_s"`
	GPUTime     Num `json:"gpu_time_s"`
	Utilization Num `json:"utilization"`
	Preemptions int `json:"preemptions"`
	// LostWork is the GPU-seconds of work lost to preemption (execution
	// since a victim's newest periodic checkpoint x its GPUs): present
	// only for runs with periodic checkpoints (sim.checkpoint_every > 0).
	LostWork *Num `json:"lost_work_gpu_s,omitempty"`

	// FitGpp's metrics (Yabuuchi et al., OpML'19): slowdown = 1 + queueing
	// delay / execution time, over the finished jobs of each class (te:
	// trial and error, be: best effort; null without such jobs); the jobs
	// preempted at least once; the time from a preemption to the job's next
	// start, over all restarts.
	ClassSummary

	// Finish-time fairness over apps (the Themis paper).
	AppFairness

	// Virtual clusters (themis sim --vc-config): the mode, each VC's
	// queueing in the shared and in its private cluster, the VCs that wait
	// longer shared than private (sharing anomalies) and the largest excess.
	// Absent from runs without virtual clusters.
	VCMode           string      `json:"vc_mode,omitempty"`
	VCs              []VCSummary `json:"vcs,omitempty"`
	SharingAnomalies *int        `json:"sharing_anomalies,omitempty"`
	MaxExcessQueue   *Num        `json:"max_excess_queue_s,omitempty"`
	// PrivateAvgQueue is the average queueing delay of all the private
	// clusters' finished jobs together (compare AvgQueue).
	PrivateAvgQueue *Num `json:"private_avg_queue_s,omitempty"`

	// Wall is how long the simulator ran: the one field that differs
	// between runs of identical input.
	Wall Num `json:"wall_s"`
}

// AppFairness is a run's finish-time fairness (the Themis paper, section
// 3.2; sim.AppResult): apps are the jobs sharing a trace App (a job without
// one is an app of its own); rho = (app finish - app arrival) / T_id with T_id = the
// app's GPU-seconds / min(total GPUs, its demand) x N_avg, N_avg the
// number of active apps averaged over its lifetime. An app that did not
// finish has rho = +Inf (max_rho is then null). frac_rho_le_1 is the
// share of apps with rho <= 1. avg_placement_score is the mean over the
// jobs that ran of each job's placement slowdown averaged over its
// running time (1: every job always ran on one machine; higher is
// worse). p95_rho and p99_rho are nearest-rank percentiles of rho.
//
// When the runs of a comparison share each app's T_id (sim.ShareIdeal),
// max_shared_rho and p95_shared_rho are rho with that T_id; when each
// app's floor is known (sim.Floors: its rho alone on the empty cluster),
// max_rho_over_floor is the largest rho / floor and apps_floor_above_1 the
// number of apps whose floor exceeds 1.
type AppFairness struct {
	Apps              int  `json:"apps"`
	AppsFinished      int  `json:"apps_finished"`
	MaxRho            Num  `json:"max_rho"`
	MedianRho         Num  `json:"median_rho"`
	P95Rho            Num  `json:"p95_rho"`
	P99Rho            Num  `json:"p99_rho"`
	FracRhoLE1        Num  `json:"frac_rho_le_1"`
	AvgPlacementScore Num  `json:"avg_placement_score"`
	MaxSharedRho      *Num `json:"max_shared_rho,omitempty"`
	P95SharedRho      *Num `json:"p95_shared_rho,omitempty"`
	MaxRhoOverFloor   *Num `json:"max_rho_over_floor,omitempty"`
	AppsFloorAbove1   *int `json:"apps_floor_above_1,omitempty"`
}

// ClassSummary is FitGpp's metrics of a run (see Summary).
type ClassSummary struct {
	TEMedianSlowdown Num `json:"te_median_slowdown"`
	TEP95Slowdown    Num `json:"te_p95_slowdown"`
	BEMedianSlowdown Num `json:"be_median_slowdown"`
	BEP95Slowdown    Num `json:"be_p95_slowdown"`
	PreemptedJobs    int `json:"preempted_jobs"`
	MedianRestart    Num `json:"median_restart_s"`
	P95Restart       Num `json:"p95_restart_s"`
}

// VCSummary is one virtual cluster's line of summary.json.
type VCSummary struct {
	Name            string `json:"name"`
	GPUs            int    `json:"gpus"`
	Jobs            int    `json:"jobs"`
	Finished        int    `json:"finished"`
	PrivateFinished int    `json:"private_finished"`
	AvgQueue        Num    `json:"avg_queue_s"`
	PrivateAvgQueue Num    `json:"private_avg_queue_s"`
	ExcessQueue     Num    `json:"excess_queue_s"`
	AvgJCT          Num    `json:"avg_jct_s"`
	PrivateAvgJCT   Num    `json:"private_avg_jct_s"`
	Anomaly         bool   `json:"anomaly"`
	P95Queue        Num    `json:"p95_queue_s"`
	PrivateP95Queue Num    `json:"private_p95_queue_s"`
	Preemptions     int    `json:"preemptions"`
}

// Summarize computes the headline metrics of r.
func Summarize(r sim.Result) Summary {
	s := Summary{
		Policy:      r.Policy,
		Trace:       r.Trace,
		Cluster:     r.Cluster,
		Seed:        r.Seed,
		TotalGPUs:   r.TotalGPUs,
		Settings:    slices.Clone(r.Settings),
		Jobs:        len(r.Jobs),
		Preemptions: r.Preemptions,
		Wall:        Num(r.WallSeconds),
	}
	if s.Settings == nil {
		s.Settings = []string{} // [] rather than null
	}
	if r.CheckpointEvery > 0 {
		lost := Num(r.LostWork)
		s.LostWork = &lost
	}
	for _, j := range r.Jobs {
		if j.Started {
			s.Started++
		}
		if j.Finished {
			s.Finished++
		}
		if j.Preemptions > 0 {
			s.PreemptedJobs++
		}
	}
	te, be := sortedCopy(slowdowns(r.Jobs, "te")), sortedCopy(slowdowns(r.Jobs, "be"))
	s.TEMedianSlowdown, s.TEP95Slowdown = percentile(te, 50), percentile(te, 95)
	s.BEMedianSlowdown, s.BEP95Slowdown = percentile(be, 50), percentile(be, 95)
	if r.VCMode != "" {
		s.VCMode = r.VCMode
		n, m := r.SharingAnomalies, Num(r.MaxExcessQueue)
		s.SharingAnomalies, s.MaxExcessQueue = &n, &m
		pq := Num(r.PrivateAvgQueue)
		s.PrivateAvgQueue = &pq
		for _, v := range r.VCs {
			s.VCs = append(s.VCs, VCSummary{Name: v.Name, GPUs: v.GPUs, Jobs: v.Jobs, Finished: v.Finished,
				PrivateFinished: v.PrivateFinished, AvgQueue: Num(v.AvgQueue), PrivateAvgQueue: Num(v.PrivateAvgQueue),
				ExcessQueue: Num(v.ExcessQueue), AvgJCT: Num(v.AvgJCT), PrivateAvgJCT: Num(v.PrivateAvgJCT), Anomaly: v.Anomaly,
				P95Queue: Num(v.P95Queue), PrivateP95Queue: Num(v.PrivateP95Queue), Preemptions: v.Preemptions})
		}
	}
	rhos := sortedCopy(AppRhos(r))
	s.Apps = len(rhos)
	le1 := 0
	for _, a := range r.Apps {
		if a.Finished {
			s.AppsFinished++
		}
		if a.Rho <= 1 {
			le1++
		}
	}
	s.MaxRho, s.MedianRho, s.FracRhoLE1 = percentile(rhos, 100), percentile(rhos, 50), undefined()
	s.P95Rho, s.P99Rho = percentile(rhos, 95), percentile(rhos, 99)
	if len(rhos) > 0 {
		s.FracRhoLE1 = Num(float64(le1) / float64(len(rhos)))
	}
	s.sharedAndFloors(r)
	s.AvgPlacementScore = mean(PlacementScores(r))
	restarts := sortedCopy(r.Restarts)
	s.MedianRestart, s.P95Restart = percentile(restarts, 50), percentile(restarts, 95)

	jct, queue := finishedJobs(r.Jobs)
	jct, queue = sortedCopy(jct), sortedCopy(queue)
	s.AvgJCT = mean(jct)
	s.MedianJCT = percentile(jct, 50)
	s.P95JCT = percentile(jct, 95)
	s.P99JCT = percentile(jct, 99)
	s.MaxJCT = percentile(jct, 100)
	s.AvgQueue = mean(queue)
	s.MedianQueue = percentile(queue, 50)
	s.P95Queue = percentile(queue, 95)

	s.Makespan = Num(r.Makespan)
	s.GPUTime, s.Utilization = undefined(), undefined()
	if s.Makespan.Defined() && r.Makespan >= 0 {
		busy := busyGPUSeconds(r.Util, r.Makespan)
		s.GPUTime = Num(busy)
		if r.TotalGPUs > 0 && r.Makespan > 0 {
			s.Utilization = Num(busy / (float64(r.TotalGPUs) * r.Makespan))
		}
	} else {
		s.Makespan = undefined()
	}
	return s
}

// sharedAndFloors sets the fairness fields that need more than one run
// (see AppFairness).
func (s *AppFairness) sharedAndFloors(r sim.Result) {
	var shared, over []float64
	haveShared, haveFloor, above := false, false, 0
	for _, a := range r.Apps {
		if a.SharedIdeal > 0 {
			haveShared = true
		}
		shared = append(shared, a.SharedRho)
		if a.Floor > 0 {
			haveFloor = true
			if a.Floor > 1 {
				above++
			}
			over = append(over, a.Rho/a.Floor)
		}
	}
	if haveShared {
		shared = sortedCopy(shared)
		mx, p95 := percentile(shared, 100), percentile(shared, 95)
		s.MaxSharedRho, s.P95SharedRho = &mx, &p95
	}
	if haveFloor {
		mx := percentile(sortedCopy(over), 100)
		s.MaxRhoOverFloor, s.AppsFloorAbove1 = &mx, &above
	}
}

// AppRhos is every app's finish-time fairness rho, in app order (+Inf for
// an app that did not finish).
func AppRhos(r sim.Result) []float64 {
	out := make([]float64, len(r.Apps))
	for i, a := range r.Apps {
		out[i] = a.Rho
	}
	return out
}

// PlacementScores is the placement slowdown of every job that ran, in trace
// order.
func PlacementScores(r sim.Result) []float64 {
	var out []float64
	for _, j := range r.Jobs {
		if j.Placement > 0 {
			out = append(out, j.Placement)
		}
	}
	return out
}
