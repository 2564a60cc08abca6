package sim

import "math"

// JobResult is what happened to one job in a simulation run. Times are
// seconds since the start of the trace (the earliest submission).
type JobResult struct {
	ID    string
	VC    string
	Model string
	// Class is the job's class: "te" or "be" (trial and error, best
	// effort).
	Class string
	GPUs  int
	// Submit is when the job arrived; Start when it first ran; End when it
	// finished (meaningful only when Finished).
	Submit, Start, End float64
	// Duration is the job's execution time at full speed, as the trace
	// gives it (no placement slowdown, no preemption overhead).
	Duration float64
	// Queue is the total time the job spent waiting (not running) between
	// Submit and End (or the end of the run), including the time a granted
	// job waits for preempted jobs to finish their grace periods.
	Queue float64
	// Preemptions counts how often the job was stopped and put back.
	Preemptions int
	// Started and Finished say whether the job ever ran and whether it
	// completed before the simulation ended.
	Started, Finished bool
	// App and Phase are the trace's (the Themis workloads'); a job of a
	// later successive-halving phase is submitted when its app's previous
	// phase finished (see apps.go), and Submit is then that time.
	App   string
	Phase int
	// Placement is the job's placement slowdown averaged over its running
	// time (1: always on one machine; 0: never ran).
	Placement float64
	// LostWork is the GPU-seconds of work the job's preemptions lost: the
	// execution since its newest periodic checkpoint, times its GPUs (0
	// without periodic checkpoints; checkpoints.go).
	LostWork float64
}

// Slowdown is FitGpp's slowdown rate, 1 + waiting / execution time (1 for
// a job of no execution time that never waited).
func (j JobResult) Slowdown() float64 {
	if j.Duration <= 0 {
		if j.Queue <= 0 {
			return 1
		}
		return math.Inf(1)
	}
	return 1 + j.Queue/j.Duration
}

// JCT is the job completion time, End - Submit.
func (j JobResult) JCT() float64 { return j.End - j.Submit }

// UtilSample is the number of busy GPUs from T until the next sample.
type UtilSample struct {
	T    float64
	Busy int
}

// Result is one simulation run.
type Result struct {
	Policy    string
	Trace     string
	Cluster   string
	Seed      int64
	TotalGPUs int
	// Settings are the --set knobs in effect, as key=value.
	Settings []string
	Jobs     []JobResult // in trace order
	Util     []UtilSample
	// Makespan is the time from the first submission to the last completion.
	Makespan    float64
	Preemptions int
	// CheckpointEvery is the run's period of checkpoints (0: none, a
	// preempted job loses nothing); LostWork the GPU-seconds of work lost
	// to preemption, over all jobs.
	CheckpointEvery, LostWork float64
	// Restarts are the seconds from each preemption to the preempted
	// job's next start, in the order the restarts happened.
	Restarts []float64
	// VCMode, VCs, SharingAnomalies and MaxExcessQueue describe a run
	// with virtual clusters (RunVCs); VCMode is "" otherwise.
	// Apps is every app's finish-time fairness (AppResult), in order of
	// first appearance in the trace.
	Apps             []AppResult
	VCMode           string
	VCs              []VCResult
	SharingAnomalies int
	MaxExcessQueue   float64
	// PrivateAvgQueue is the average queueing delay of the finished jobs of
	// every VC's private cluster together (NaN without VCs or when none
	// finished), to compare with the shared run's.
	PrivateAvgQueue float64
	// WallSeconds is how long the simulator itself ran.
	WallSeconds float64
}
