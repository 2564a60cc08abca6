package sim

// JobResult is what happened to one job in a simulation run. Times are
// seconds since the start of the trace (the earliest submission).
type JobResult struct {
	ID    string
	VC    string
	Model string
	GPUs  int
	// Submit is when the job arrived; Start when it first ran; End when it
	// finished (meaningful only when Finished).
	Submit, Start, End float64
	// Duration is the job's execution time at full speed, as the trace
	// gives it (no placement slowdown, no preemption overhead).
	Duration float64
	// Queue is the total time the job spent waiting (not running) between
	// Submit and End (or the end of the run).
	Queue float64
	// Preemptions counts how often the job was stopped and put back.
	Preemptions int
	// Started and Finished say whether the job ever ran and whether it
	// completed before the simulation ended.
	Started, Finished bool
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
	// WallSeconds is how long the simulator itself ran.
	WallSeconds float64
}
